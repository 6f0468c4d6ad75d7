#!/usr/bin/env bash
# bench/pg_server_time.sh -- where the server's time goes in each operation of
# simba_pg.sql (the server side of simba_pg.h), measured without the client:
#
#   tests/servers/pg.sh run bench/pg_server_time.sh [CYCLES]
#
# Restarts the test server with pg_stat_statements (track = all, so the
# statements inside the PL/pgSQL functions count too), track_functions = all
# and fsync = off (the CPU, not the disk), installs simba_pg.sql, then runs
# pgbench on one connection for each scenario:
#   cycle     enqueue (a free mutex) + release;
#   handoff   A holds, B waits, A releases (the grant + NOTIFY), B releases;
#   poll      a waiter's POLL while another session holds (read only);
#   floor     one single-row INSERT + one DELETE (the commit pairs the
#             figures of make bench-pg are divided by).
# Prints µs per call of each top-level statement (pgbench -r: the round trip
# on loopback included), then per scenario the statements run inside the
# functions per operation and their total execution time.
set -eu
: "${SIMBA_PG_CTL:?run me under tests/servers/pg.sh}"
N=${1:-2000}
cd "$(dirname "$0")/.."
export PGPASSWORD=$SIMBA_PG_PASSWORD
CON=(-h "$SIMBA_PG_HOST" -p "$SIMBA_PG_PORT" -U "$SIMBA_PG_USER")
PSQL=(psql "${CON[@]}" -d "$SIMBA_PG_DATABASE" -XAtq -v ON_ERROR_STOP=1)
# the role pgbench runs as: the superuser (as make bench-pg) or, with
# SIMBA_PG_AS=app, a least-privilege role (row-level security applies)
AS_ROLE=${SIMBA_PG_AS:-$SIMBA_PG_USER}
PGBENCH=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)/pgbench
for s in "shared_preload_libraries = 'pg_stat_statements'" "track_functions = 'all'" \
         "fsync = off" "synchronous_commit = off"; do
    "$SIMBA_PG_CTL" sql "ALTER SYSTEM SET $s" >/dev/null
done
"$SIMBA_PG_CTL" restart >/dev/null
"$SIMBA_PG_CTL" sql "ALTER SYSTEM SET pg_stat_statements.track = 'all'" >/dev/null
"$SIMBA_PG_CTL" sql "ALTER SYSTEM SET pg_stat_statements.track_planning = on" >/dev/null
"$SIMBA_PG_CTL" sql "SELECT pg_reload_conf()" >/dev/null
"${PSQL[@]}" -f simba_pg.sql >/dev/null
"${PSQL[@]}" ${SIMBA_PG_PLAN_CACHE_MODE:+-v plan_cache_mode=$SIMBA_PG_PLAN_CACHE_MODE} >/dev/null <<'SQL'
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
ALTER DATABASE simba_test SET simba_pg.restart_grace = '-1';   -- fsync is off: no grace here
\if :{?plan_cache_mode}
ALTER DATABASE simba_test SET plan_cache_mode = :'plan_cache_mode';
\endif
CREATE ROLE app LOGIN PASSWORD 'app';
GRANT USAGE ON SCHEMA simba TO app;
GRANT SELECT, INSERT, UPDATE, DELETE ON simba.sessions, simba.resources, simba.entries, simba.tenants TO app;
GRANT SELECT ON simba.tenant_roles TO app;
CREATE TABLE floor_rows (k integer PRIMARY KEY, v text);
INSERT INTO simba.sessions (tenant, session, expires, lease_ms) VALUES ('t', 'a~000000000000000a', now() + interval '1 day', 86400000),
                                  ('t', 'b~000000000000000b', now() + interval '1 day', 86400000);
SQL
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
E="SELECT o_status, o_granted FROM simba.enqueue('t', '%s~000000000000000%s', '%s', false, false, ARRAY['%s'], ARRAY[1], ARRAY[0]);"
R="SELECT simba.release('t', '%s~000000000000000%s', '%s', ARRAY['%s']);"
P="SELECT o_status, o_granted FROM simba.poll('t', '%s~000000000000000%s', '%s', ARRAY['%s']);"
{ printf "$E\n" a a r1 6331; printf "$R\n" a a r1 6331; } >"$W/cycle.sql"
{ printf "$E\n" a a r1 6332; printf "$E\n" b b r2 6332; printf "$R\n" a a r1 6332; printf "$R\n" b b r2 6332; } >"$W/handoff.sql"
{ printf "$P\n" b b r2 6333; } >"$W/poll.sql"
printf 'INSERT INTO floor_rows VALUES (1, %s);\nDELETE FROM floor_rows WHERE k = 1;\n' "'x'" >"$W/floor.sql"
run() {   # run NAME OPS_PER_TRANSACTION
    "${PSQL[@]}" -c "SELECT pg_stat_statements_reset()" -c "SELECT pg_stat_reset()" >/dev/null
    local lsn0; lsn0=$("${PSQL[@]}" -c "SELECT pg_current_wal_insert_lsn()")
    PGPASSWORD=$([ "$AS_ROLE" = app ] && echo app || echo "$SIMBA_PG_PASSWORD") \
    "$PGBENCH" -h "$SIMBA_PG_HOST" -p "$SIMBA_PG_PORT" -U "$AS_ROLE" -n -r -c 1 -t "$N" -f "$W/$1.sql" "$SIMBA_PG_DATABASE" 2>/dev/null \
        | sed -n '/statement latencies/,$p' | sed 1d \
        | awk -v n="$1" '{ printf "  %-8s %8.1f us  %s\n", n, $1 * 1000, substr($0, index($0, $3)) }'
    "${PSQL[@]}" -c "SELECT '  $1: WAL ' || round(pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$lsn0')
            / ($N * $2)) || ' bytes per op'"
    "${PSQL[@]}" -F' ' -c "SELECT '  ' || '$1' || ': inner statements per op ' ||
            round(sum(calls)::numeric / ($N * $2), 1) || ', their time (a call counts the statements inside it too) ' ||
            round((sum(total_exec_time) * 1000 / ($N * $2))::numeric, 1) || ' us per op, planned ' ||
            round(sum(plans)::numeric / ($N * $2), 1) || ' times per op in ' ||
            round((sum(total_plan_time) * 1000 / ($N * $2))::numeric, 1) || ' us'
        FROM pg_stat_statements WHERE toplevel = false"
    "${PSQL[@]}" -F' ' -c "SELECT '    ' || rpad(round((total_exec_time * 1000 / ($N * $2))::numeric, 1)::text, 7)
            || ' us ' || rpad(round(calls::numeric / ($N * $2), 2)::text, 5) || ' x  '
            || left(regexp_replace(query, '\s+', ' ', 'g'), 110)
        FROM pg_stat_statements WHERE toplevel = false ORDER BY total_exec_time DESC LIMIT ${TOP:-12}"
    "${PSQL[@]}" -F' ' -c "SELECT '    fn ' || rpad(funcname, 14) || rpad(round((self_time * 1000 / ($N * $2))::numeric, 1)::text, 7)
            || ' us self ' || round(calls::numeric / ($N * $2), 2) || ' x'
        FROM pg_stat_user_functions ORDER BY self_time DESC LIMIT 10"
}
"${PSQL[@]}" -c "SELECT pg_sleep(0.6)" >/dev/null   # stats of the setup flushed
"$PGBENCH" "${CON[@]}" -n -c 1 -t 200 -f "$W/cycle.sql" "$SIMBA_PG_DATABASE" >/dev/null 2>&1  # warm
echo "cycle (enqueue + release of a free mutex), per op = per call:"; run cycle 2
echo "handoff (A holds, B waits, A releases: grant + NOTIFY, B releases):"; run handoff 4
"${PSQL[@]}" -c "SELECT simba.enqueue('t', 'a~000000000000000a', 'r1', false, false, ARRAY['6333'], ARRAY[1], ARRAY[0])" \
             -c "SELECT simba.enqueue('t', 'b~000000000000000b', 'r2', false, false, ARRAY['6333'], ARRAY[1], ARRAY[0])" >/dev/null
echo "poll (a waiter, the holder alive):"; run poll 1
echo "floor (INSERT + DELETE of one row):"; run floor 2
