-- simba_pg.sql -- the schema of simba's PostgreSQL backend (simba_pg.h), for
-- DBAs who install it by hand instead of letting a client do it
-- (simba_pg_desc.create_schema = 1 runs exactly these statements; a test
-- checks that this file is simba_pg_schema("simba") after this comment).
--
-- Works on PostgreSQL >= 13 (gen_random_uuid). Everything lives in the schema "simba"; for
-- another schema name, print the schema with simba_pg_schema(name, ...).
--
--   psql -v ON_ERROR_STOP=1 -d yourdb -f simba_pg.sql
--
-- Run it as the role that should own the tables (not as the clients' role).
-- The least privileges a simba client needs (role app as an example):
--
--   GRANT USAGE ON SCHEMA simba TO app;
--   GRANT SELECT, INSERT, UPDATE, DELETE ON simba.sessions, simba.resources,
--         simba.entries, simba.tenants TO app;
--   GRANT SELECT ON simba.tenant_roles TO app;
--   GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA simba TO app;   -- the default
--
-- Tenant isolation (docs/postgres.md): every table of tenant rows has
-- row-level security (forced, also for the owner); a tenant listed in
-- simba.tenant_roles is usable only by the roles listed for it (and their
-- members):
--
--   INSERT INTO simba.tenant_roles VALUES ('billing', 'app_billing');
--
-- A tenant not listed is shared by every role with the grants above.
--
-- Time is the server's only (clock_timestamp()); names are bytea (any
-- bytes, compared byte-wise); fences are bigint. The functions run with the
-- caller's rights (SECURITY INVOKER), so the policies apply to them too, and
-- with search_path = pg_catalog, pg_temp (the SQL helpers without it use
-- pg_catalog's operators only), so no operator or function that a role
-- creates in a schema on a caller's path (public) can stand in for one.
SELECT pg_advisory_xact_lock(7236450315724219);
DO $d$ DECLARE v integer := COALESCE((SELECT substring(p.prosrc FROM '[0-9]+')::integer
    FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname = 'simba' AND p.proname = 'version' AND p.pronargs = 0), 0);
BEGIN
    IF v > 12 THEN
        RAISE EXCEPTION 'schema simba has version %, newer than this simba_pg.sql (12): keep it, use the newer simba', v;
    END IF;
END $d$;
CREATE SCHEMA IF NOT EXISTS simba;
CREATE TABLE IF NOT EXISTS simba.sessions (
    tenant    text        NOT NULL,
    session   text        NOT NULL,    -- "<client id>~<16 hex>"
    expires   timestamptz NOT NULL,    -- server time; dead when <= now
    lease_ms  integer     NOT NULL,
    PRIMARY KEY (tenant, session));
ALTER TABLE simba.sessions ADD COLUMN IF NOT EXISTS opened timestamptz;
CREATE TABLE IF NOT EXISTS simba.resources (
    tenant    text    NOT NULL,
    name      bytea   NOT NULL,        -- any bytes: compared byte-wise
    capacity  integer NOT NULL,
    counter   bigint  NOT NULL DEFAULT 0,  -- the last fence granted
    seq       bigint  NOT NULL DEFAULT 0,  -- the last queue position given out
    held      integer NOT NULL DEFAULT 0,  -- granted entries
    owner     text,                        -- session of the oldest granted entry
    PRIMARY KEY (tenant, name));
ALTER TABLE simba.resources ADD COLUMN IF NOT EXISTS h_seq bigint,
    ADD COLUMN IF NOT EXISTS h_request text, ADD COLUMN IF NOT EXISTS h_session text,
    ADD COLUMN IF NOT EXISTS h_opened timestamptz, ADD COLUMN IF NOT EXISTS h_weight integer,
    ADD COLUMN IF NOT EXISTS h_fence bigint, ADD COLUMN IF NOT EXISTS h_watch boolean,
    ADD COLUMN IF NOT EXISTS h_token text;
CREATE TABLE IF NOT EXISTS simba.entries (
    tenant    text    NOT NULL,
    name      bytea   NOT NULL,
    seq       bigint  NOT NULL,
    request   text    NOT NULL,
    session   text    NOT NULL,
    weight    integer NOT NULL,        -- 0 = exclusive (the whole capacity)
    fence     bigint  NOT NULL DEFAULT 0,
    watch     boolean NOT NULL DEFAULT false,  -- told when the owner changes
    PRIMARY KEY (tenant, name, seq),
    UNIQUE (tenant, name, request));
CREATE INDEX IF NOT EXISTS entries_session ON simba.entries (tenant, session);
ALTER TABLE simba.entries ADD COLUMN IF NOT EXISTS token text;
CREATE INDEX IF NOT EXISTS entries_watch ON simba.entries (tenant, name) WHERE watch;
CREATE TABLE IF NOT EXISTS simba.tenants (
    tenant    text    PRIMARY KEY,
    epoch     bigint  NOT NULL DEFAULT 1);
ALTER TABLE simba.tenants ADD COLUMN IF NOT EXISTS boot timestamptz;
ALTER TABLE simba.tenants ADD COLUMN IF NOT EXISTS grace_until timestamptz;
ALTER TABLE simba.tenants ADD COLUMN IF NOT EXISTS lease_max integer,
    ADD COLUMN IF NOT EXISTS lease_until timestamptz;
CREATE UNLOGGED TABLE IF NOT EXISTS simba.run (
    one        boolean     PRIMARY KEY DEFAULT true CHECK (one),
    started    timestamptz NOT NULL,    -- this run's id (tenants.boot)
    postmaster timestamptz NOT NULL     -- pg_postmaster_start_time() of the run
);
GRANT SELECT ON simba.run TO PUBLIC;
CREATE TABLE IF NOT EXISTS simba.tenant_roles (
    tenant    text NOT NULL,
    role      name NOT NULL,
    PRIMARY KEY (tenant, role));
DO $d$ DECLARE v integer := COALESCE((SELECT substring(p.prosrc FROM '[0-9]+')::integer
    FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname = 'simba' AND p.proname = 'version' AND p.pronargs = 0), 0);
BEGIN
    IF v < 6 THEN
        DROP FUNCTION IF EXISTS simba.state(text, text, text, bytea[], timestamptz);
        DROP FUNCTION IF EXISTS simba.enqueue(text, text, text, boolean, boolean, text[], integer[], integer[]);
        DROP FUNCTION IF EXISTS simba.poll(text, text, text, text[]);
        DROP FUNCTION IF EXISTS simba.inspect(text, text);
    END IF;
    IF v < 9 THEN
        DROP FUNCTION IF EXISTS simba.join_queue(text, text, text, boolean, boolean, bytea[], bigint[], integer[],
                                             timestamptz);
    END IF;
    IF v < 12 THEN
        INSERT INTO simba.run (started, postmaster)
            VALUES (pg_catalog.pg_postmaster_start_time(), pg_catalog.pg_postmaster_start_time())
            ON CONFLICT (one) DO NOTHING;
    END IF;
END $d$;
CREATE OR REPLACE FUNCTION simba.version() RETURNS integer LANGUAGE sql IMMUTABLE AS $f$ SELECT 12 $f$;
DO $d$ DECLARE t text; v_rule text; BEGIN
    FOREACH t IN ARRAY ARRAY['sessions', 'resources', 'entries', 'tenants'] LOOP
        EXECUTE format('ALTER TABLE simba.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE simba.%I FORCE ROW LEVEL SECURITY', t);
        v_rule := format('(NOT EXISTS (SELECT 1 FROM simba.tenant_roles t WHERE t.tenant = %1$I.tenant)'
                         ' OR EXISTS (SELECT 1 FROM simba.tenant_roles t'
                         ' JOIN pg_catalog.pg_roles r ON r.rolname = t.role WHERE t.tenant = %1$I.tenant'
                         ' AND pg_catalog.pg_has_role(current_user, r.oid, ''MEMBER'')))', t);
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_policies p
                       WHERE p.schemaname = 'simba' AND p.tablename = t AND p.policyname = 'tenant_rows') THEN
            EXECUTE format('CREATE POLICY tenant_rows ON simba.%I USING %s WITH CHECK %s', t, v_rule, v_rule);
        ELSE
            EXECUTE format('ALTER POLICY tenant_rows ON simba.%I USING %s WITH CHECK %s', t, v_rule, v_rule);
        END IF;
    END LOOP;
END $d$;
DROP FUNCTION IF EXISTS simba.tenant_ok(text);
CREATE OR REPLACE FUNCTION simba.grant_weight(p_weight integer, p_capacity integer) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $f$
    SELECT CASE WHEN p_weight = 0 OR p_weight > p_capacity THEN p_capacity ELSE p_weight END::bigint
$f$;
CREATE OR REPLACE FUNCTION simba.next_fence(p_counter bigint, p_now timestamptz) RETURNS bigint
LANGUAGE sql STABLE AS $f$
    SELECT GREATEST(p_counter + 1, (extract(epoch FROM p_now) OPERATOR(pg_catalog.*) 1000000)::bigint)   -- simba_grant_fence
$f$;
CREATE OR REPLACE FUNCTION simba.channel(p_session text) RETURNS text LANGUAGE sql IMMUTABLE AS $f$
    SELECT 'simba_' || right(p_session, 16)
$f$;
CREATE OR REPLACE FUNCTION simba.live(p_tenant text, p_session text, p_now timestamptz) RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
    RETURN EXISTS (SELECT 1 FROM simba.sessions s
                   WHERE s.tenant = p_tenant AND s.session = p_session AND s.expires > p_now);
END $f$;
CREATE OR REPLACE FUNCTION simba.mark_run() RETURNS timestamptz
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE v_run timestamptz;
BEGIN
    SELECT m.started INTO v_run FROM simba.run m WHERE m.postmaster = pg_postmaster_start_time();
    IF FOUND THEN RETURN v_run; END IF;
    INSERT INTO simba.run AS m (started, postmaster) VALUES (clock_timestamp(), pg_postmaster_start_time())
        ON CONFLICT (one) DO UPDATE SET started = EXCLUDED.started, postmaster = EXCLUDED.postmaster
        WHERE m.postmaster <> EXCLUDED.postmaster;
    SELECT m.started INTO v_run FROM simba.run m;
    RETURN v_run;
END $f$;
CREATE OR REPLACE FUNCTION simba.note_lease(p_tenant text, p_lease integer, p_now timestamptz) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
    IF EXISTS (SELECT 1 FROM simba.tenants t WHERE t.tenant = p_tenant AND t.lease_max >= p_lease
               AND t.lease_until >= p_now + p_lease * interval '1 millisecond') THEN
        RETURN;
    END IF;
    PERFORM set_config('synchronous_commit', 'on', true);
    INSERT INTO simba.tenants AS t (tenant, lease_max, lease_until)
        VALUES (p_tenant, p_lease, p_now + 2 * p_lease * interval '1 millisecond')
        ON CONFLICT (tenant) DO UPDATE
        SET lease_max = CASE WHEN t.lease_until > p_now THEN GREATEST(t.lease_max, p_lease) ELSE p_lease END,
            lease_until = GREATEST(t.lease_until, EXCLUDED.lease_until);
END $f$;
CREATE OR REPLACE FUNCTION simba.notice_boot(p_tenant text, p_now timestamptz) RETURNS timestamptz
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
DECLARE
    v_boot timestamptz; v_grace timestamptz; v_lost timestamptz; v_start timestamptz := simba.mark_run();
    v_mode text := COALESCE(current_setting('simba_pg.restart_grace', true), '0'); v_lease integer;
BEGIN
    SELECT t.boot, t.grace_until INTO v_boot, v_grace FROM simba.tenants t WHERE t.tenant = p_tenant;
    IF FOUND AND v_boot = v_start THEN RETURN v_grace; END IF;
    v_grace := NULL;
    IF v_mode = '1' OR (v_mode = '0' AND (current_setting('fsync') = 'off'
                                        OR current_setting('synchronous_commit') = 'off')) THEN
        SELECT COALESCE(max(s.lease_ms), 0) INTO v_lease FROM simba.sessions s WHERE s.tenant = p_tenant;
        SELECT LEAST(t.lease_until, p_now + t.lease_max * interval '1 millisecond') INTO v_lost
            FROM simba.tenants t WHERE t.tenant = p_tenant AND t.lease_until > p_now;
        v_grace := GREATEST(p_now + v_lease * interval '1 millisecond', v_lost);
        -- a grant that a session from before holds may be lost: none of them is renewed (an
        -- expiry before the postmaster's start is before the clock of every call of this run)
        UPDATE simba.sessions s SET expires = pg_postmaster_start_time()
            WHERE s.tenant = p_tenant AND s.expires > pg_postmaster_start_time();
    END IF;
    INSERT INTO simba.tenants AS t (tenant, boot, grace_until) VALUES (p_tenant, v_start, v_grace)
        ON CONFLICT (tenant) DO UPDATE SET boot = EXCLUDED.boot, grace_until = EXCLUDED.grace_until;
    RETURN v_grace;
END $f$;
CREATE OR REPLACE FUNCTION simba.notice_run(p_tenant text, p_now timestamptz) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM simba.tenants t WHERE t.tenant = p_tenant
                   AND t.boot = (SELECT m.started FROM simba.run m
                                 WHERE m.postmaster = pg_postmaster_start_time())) THEN
        PERFORM simba.notice_boot(p_tenant, p_now);
    END IF;
END $f$;
CREATE OR REPLACE FUNCTION simba.unfold(p_tenant text, p_name bytea) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
    INSERT INTO simba.entries (tenant, name, seq, request, session, weight, fence, watch, token)
        SELECT r.tenant, r.name, r.h_seq, r.h_request, r.h_session, r.h_weight, r.h_fence, r.h_watch, r.h_token
        FROM simba.resources r JOIN simba.sessions s ON s.tenant = r.tenant AND s.session = r.h_session
            AND s.opened IS NOT DISTINCT FROM r.h_opened
        WHERE r.tenant = p_tenant AND r.name = p_name
        FOR KEY SHARE OF s;
    UPDATE simba.resources r SET h_seq = NULL, h_request = NULL, h_session = NULL, h_opened = NULL,
        h_weight = NULL, h_fence = NULL, h_watch = NULL, h_token = NULL
        WHERE r.tenant = p_tenant AND r.name = p_name AND r.h_session IS NOT NULL;
END $f$;
CREATE OR REPLACE FUNCTION simba.settle(p_tenant text, p_name bytea, p_now timestamptz, p_quiet text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
DECLARE
    v_cap integer; v_counter bigint; v_counter0 bigint; v_old text; v_owner text; v_grace timestamptz;
    v_held integer := 0; v_held0 integer; v_ahead bigint := 0; v_fence bigint; v_booted boolean; e record;
    v_watched boolean := false; v_inline boolean;
BEGIN
    SELECT r.capacity, r.counter, r.owner, r.held, t.boot = (SELECT m.started FROM simba.run m
               WHERE m.postmaster = pg_catalog.pg_postmaster_start_time()), t.grace_until,
           r.h_session IS NOT NULL INTO v_cap, v_counter, v_old, v_held0, v_booted, v_grace, v_inline
        FROM simba.resources r LEFT JOIN simba.tenants t ON t.tenant = r.tenant
        WHERE r.tenant = p_tenant AND r.name = p_name;
    IF NOT FOUND THEN RETURN; END IF;
    IF v_inline THEN PERFORM simba.unfold(p_tenant, p_name); END IF;   -- changes none of the above
    -- once this server run has noticed its boot in the tenant, the row read above holds its grace
    IF v_booted IS NOT TRUE THEN v_grace := simba.notice_boot(p_tenant, p_now); END IF;
    v_counter0 := v_counter;
    -- v_watched: a watcher may be in the queue (a walk to its end sees every live
    -- entry; one that stops at a waiter does not, and the query at the end looks)
    FOR e IN SELECT q.seq, q.session, q.request, q.weight, q.fence, q.token, q.watch, s.expires
             FROM simba.entries q LEFT JOIN simba.sessions s ON s.tenant = q.tenant AND s.session = q.session
             WHERE q.tenant = p_tenant AND q.name = p_name ORDER BY q.seq LOOP
        IF e.expires IS NULL OR e.expires <= p_now THEN
            DELETE FROM simba.entries q WHERE q.tenant = p_tenant AND q.name = p_name AND q.seq = e.seq;
            CONTINUE;
        END IF;
        v_ahead := v_ahead + simba.grant_weight(e.weight, v_cap);      -- simba_grant_step
        IF e.fence = 0 THEN
            IF v_ahead > v_cap OR v_grace > p_now THEN                -- the restart grace
                v_watched := true;
                EXIT;
            END IF;
            v_fence := simba.next_fence(v_counter, p_now);            -- simba_grant_fence
            v_counter := v_fence;
            UPDATE simba.entries q SET fence = v_fence
                WHERE q.tenant = p_tenant AND q.name = p_name AND q.seq = e.seq;
            IF e.request IS DISTINCT FROM p_quiet THEN
                PERFORM pg_notify(simba.channel(e.session), 'g ' || e.request || ' ' || encode(p_name, 'hex')
                                  || ' ' || v_fence || ' ' || COALESCE(e.token, '-'));
            END IF;
        END IF;
        v_held := v_held + 1;
        IF v_owner IS NULL THEN v_owner := e.session; END IF;
        v_watched := v_watched OR e.watch;
    END LOOP;
    IF v_counter <> v_counter0 OR v_held <> v_held0 OR v_owner IS DISTINCT FROM v_old THEN
        UPDATE simba.resources r SET counter = v_counter, held = v_held, owner = v_owner
            WHERE r.tenant = p_tenant AND r.name = p_name;
    END IF;
    IF v_owner IS DISTINCT FROM v_old AND v_watched THEN
        PERFORM pg_notify(simba.channel(w.session), 'o - ' || encode(p_name, 'hex'))
            FROM (SELECT DISTINCT q.session FROM simba.entries q
                  WHERE q.tenant = p_tenant AND q.name = p_name AND q.watch) w;
    END IF;
END $f$;
CREATE OR REPLACE FUNCTION simba.lock_all(p_tenant text, p_names bytea[], p_caps integer[])
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
DECLARE v_i integer;
BEGIN
    FOR v_i IN SELECT k FROM generate_subscripts(p_names, 1) AS k ORDER BY p_names[k] LOOP
        IF p_caps IS NOT NULL THEN
            INSERT INTO simba.resources (tenant, name, capacity) VALUES (p_tenant, p_names[v_i], p_caps[v_i])
                ON CONFLICT (tenant, name) DO NOTHING;
        END IF;
        PERFORM 1 FROM simba.resources r WHERE r.tenant = p_tenant AND r.name = p_names[v_i] FOR UPDATE;
    END LOOP;
END $f$;
CREATE OR REPLACE FUNCTION simba.fits(p_tenant text, p_names bytea[], p_weights integer[], p_now timestamptz)
RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
DECLARE v_i integer; v_cap integer; v_ahead bigint; e record;
BEGIN
    IF EXISTS (SELECT 1 FROM simba.tenants t WHERE t.tenant = p_tenant AND t.grace_until > p_now) THEN
        RETURN false;
    END IF;
    FOR v_i IN 1 .. array_length(p_names, 1) LOOP
        SELECT r.capacity INTO v_cap FROM simba.resources r WHERE r.tenant = p_tenant AND r.name = p_names[v_i];
        v_ahead := 0;
        FOR e IN SELECT q.weight FROM simba.entries q
                 JOIN simba.sessions s ON s.tenant = q.tenant AND s.session = q.session AND s.expires > p_now
                 WHERE q.tenant = p_tenant AND q.name = p_names[v_i] ORDER BY q.seq LOOP
            v_ahead := v_ahead + simba.grant_weight(e.weight, v_cap);
            IF v_ahead > v_cap THEN RETURN false; END IF;
        END LOOP;
        IF v_ahead + simba.grant_weight(p_weights[v_i], v_cap) > v_cap THEN RETURN false; END IF;
    END LOOP;
    RETURN true;
END $f$;
CREATE OR REPLACE FUNCTION simba.state(p_tenant text, p_session text, p_request text, p_names bytea[],
    p_now timestamptz, OUT o_status integer, OUT o_granted boolean, OUT o_fences bigint[],
    OUT o_ahead integer, OUT o_held integer, OUT o_owner text, OUT o_recheck_ms integer,
    OUT o_capacity integer, OUT o_grace_ms integer,
    OUT o_token text)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $f$
DECLARE v_i integer; e record; v_min timestamptz; v_exp timestamptz;
BEGIN
    o_status := 0; o_granted := true; o_fences := '{}'; o_grace_ms := 0; o_recheck_ms := -1;
    FOR v_i IN 1 .. array_length(p_names, 1) LOOP
        -- the request's entry row, or its hold in the resource's row (while its session is the
        -- one that took it, as unfold keeps it)
        SELECT q.seq, q.fence, q.session, q.token, r.held, r.owner, r.capacity INTO e
            FROM simba.entries q JOIN simba.resources r ON r.tenant = q.tenant AND r.name = q.name
            WHERE q.tenant = p_tenant AND q.name = p_names[v_i] AND q.request = p_request
        UNION ALL
        SELECT r.h_seq, r.h_fence, r.h_session, r.h_token, r.held, r.owner, r.capacity
            FROM simba.resources r JOIN simba.sessions s ON s.tenant = r.tenant AND s.session = r.h_session
                AND s.opened IS NOT DISTINCT FROM r.h_opened
            WHERE r.tenant = p_tenant AND r.name = p_names[v_i] AND r.h_request = p_request;
        IF NOT FOUND OR e.session <> p_session THEN o_status := 4; RETURN; END IF;
        o_fences := o_fences || e.fence;
        IF v_i = 1 THEN
            o_token := e.token; o_held := e.held; o_owner := e.owner; o_capacity := e.capacity;
            -- FIFO: the entries ahead of a granted one are holders; a sole holder has none
            IF e.fence <> 0 AND e.held = 1 THEN o_ahead := 0;
            ELSE SELECT count(*) INTO o_ahead FROM simba.entries q
                     WHERE q.tenant = p_tenant AND q.name = p_names[1] AND q.seq < e.seq;
            END IF;
        END IF;
        IF e.fence = 0 THEN
            o_granted := false;
            -- the holders (the first `held` entries) go first: re-check when the first may expire
            SELECT min(s.expires) INTO v_exp FROM
                (SELECT q.session FROM simba.entries q WHERE q.tenant = p_tenant AND q.name = p_names[v_i]
                 ORDER BY q.seq LIMIT e.held) h
                JOIN simba.sessions s ON s.tenant = p_tenant AND s.session = h.session;
            IF v_exp IS NOT NULL AND (v_min IS NULL OR v_exp < v_min) THEN v_min := v_exp; END IF;
        END IF;
    END LOOP;
    IF v_min IS NOT NULL THEN
        o_recheck_ms := GREATEST(0, LEAST(1073741823, ceil(extract(epoch FROM v_min - p_now) * 1000)))::integer;
    END IF;
    IF NOT o_granted THEN
        SELECT GREATEST(0, LEAST(1073741823, ceil(extract(epoch FROM t.grace_until - p_now) * 1000)))::integer
            INTO o_grace_ms FROM simba.tenants t WHERE t.tenant = p_tenant AND t.grace_until > p_now;
        IF o_grace_ms > 0 AND (o_recheck_ms < 0 OR o_grace_ms < o_recheck_ms) THEN o_recheck_ms := o_grace_ms; END IF;
        o_grace_ms := COALESCE(o_grace_ms, 0);
    END IF;
END $f$;
CREATE OR REPLACE FUNCTION simba.epoch(p_tenant text) RETURNS bigint LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
    RETURN COALESCE((SELECT t.epoch FROM simba.tenants t WHERE t.tenant = p_tenant), 1);
END $f$;
CREATE OR REPLACE FUNCTION simba.bump_epoch(p_tenant text) RETURNS void LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $f$
    INSERT INTO simba.tenants AS t (tenant, epoch) VALUES (p_tenant, 2)
        ON CONFLICT (tenant) DO UPDATE SET epoch = t.epoch + 1
$f$;
CREATE OR REPLACE FUNCTION simba.open(p_tenant text, p_session text, p_lease integer) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
DECLARE v_now timestamptz := clock_timestamp(); v_exp timestamptz;
BEGIN
    PERFORM simba.notice_run(p_tenant, v_now);
    SELECT s.expires INTO v_exp FROM simba.sessions s WHERE s.tenant = p_tenant AND s.session = p_session;
    IF FOUND AND v_exp <= v_now THEN PERFORM simba.close(p_tenant, p_session); END IF;
    PERFORM simba.note_lease(p_tenant, p_lease, v_now);
    INSERT INTO simba.sessions AS s (tenant, session, expires, lease_ms, opened)
        VALUES (p_tenant, p_session, v_now + p_lease * interval '1 millisecond', p_lease, v_now)
        ON CONFLICT (tenant, session) DO UPDATE SET expires = EXCLUDED.expires, lease_ms = EXCLUDED.lease_ms;
    EXECUTE 'UNLISTEN *';
    EXECUTE 'LISTEN ' || quote_ident(simba.channel(p_session));
    RETURN simba.epoch(p_tenant);
END $f$;
CREATE OR REPLACE FUNCTION simba.keepalive(p_tenant text, p_session text, p_lease integer) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
DECLARE v_now timestamptz := clock_timestamp();
BEGIN
    PERFORM simba.notice_run(p_tenant, v_now);
    UPDATE simba.sessions s SET expires = v_now + p_lease * interval '1 millisecond', lease_ms = p_lease
        WHERE s.tenant = p_tenant AND s.session = p_session AND s.expires > v_now;
    IF NOT FOUND THEN RETURN -1; END IF;
    PERFORM simba.note_lease(p_tenant, p_lease, v_now);
    EXECUTE 'LISTEN ' || quote_ident(simba.channel(p_session));
    RETURN simba.epoch(p_tenant);
END $f$;
CREATE OR REPLACE FUNCTION simba.close(p_tenant text, p_session text) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
DECLARE v_now timestamptz := clock_timestamp(); v_name bytea;
BEGIN
    DELETE FROM simba.sessions s WHERE s.tenant = p_tenant AND s.session = p_session;
    FOR v_name IN SELECT DISTINCT q.name FROM simba.entries q
                  WHERE q.tenant = p_tenant AND q.session = p_session ORDER BY q.name LOOP
        PERFORM 1 FROM simba.resources r WHERE r.tenant = p_tenant AND r.name = v_name FOR UPDATE;
        DELETE FROM simba.entries q WHERE q.tenant = p_tenant AND q.name = v_name AND q.session = p_session;
        PERFORM simba.settle(p_tenant, v_name, v_now, NULL);
    END LOOP;
    RETURN 0;
END $f$;
CREATE OR REPLACE FUNCTION simba.join_queue(p_tenant text, p_session text, p_request text, p_try boolean,
    p_watch boolean, p_names bytea[], p_caps integer[], p_weights integer[], p_now timestamptz,
    OUT o_status integer, OUT o_granted boolean, OUT o_fences bigint[], OUT o_ahead integer,
    OUT o_held integer, OUT o_owner text, OUT o_recheck_ms integer, OUT o_capacity integer,
    OUT o_grace_ms integer, OUT o_token text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
DECLARE v_i integer; v_other text; v_mine boolean := false; v_order integer[] := '{1}'; v_seqs bigint[];
    v_seq bigint; v_cap integer; v_inline boolean;
BEGIN
    o_status := 0; o_granted := false; o_recheck_ms := -1; o_grace_ms := 0;
    IF array_length(p_names, 1) > 1 THEN
        v_order := ARRAY(SELECT k FROM generate_subscripts(p_names, 1) AS k ORDER BY p_names[k]);
    END IF;
    FOREACH v_i IN ARRAY v_order LOOP
        INSERT INTO simba.resources AS r (tenant, name, capacity, seq)
            SELECT p_tenant, p_names[v_i], p_caps[v_i], 1 WHERE EXISTS (SELECT 1 FROM simba.sessions s
                WHERE s.tenant = p_tenant AND s.session = p_session AND s.expires > p_now)
            ON CONFLICT (tenant, name) DO UPDATE SET seq = r.seq + 1
            RETURNING r.seq, r.capacity, r.h_session IS NOT NULL INTO v_seq, v_cap, v_inline;
        IF NOT FOUND THEN o_status := 1; RETURN; END IF;
        IF v_inline THEN PERFORM simba.unfold(p_tenant, p_names[v_i]); END IF;
        v_seqs[v_i] := v_seq;
        IF p_weights[v_i] > v_cap THEN o_status := 2; o_capacity := v_cap; RETURN; END IF;
    END LOOP;
    FOR v_i IN 1 .. array_length(p_names, 1) LOOP
        SELECT q.session INTO v_other FROM simba.entries q
            WHERE q.tenant = p_tenant AND q.name = p_names[v_i] AND q.request = p_request;
        IF FOUND THEN
            IF v_other = p_session THEN v_mine := true;
            ELSIF simba.live(p_tenant, v_other, p_now) THEN o_status := 3; RETURN;
            ELSE DELETE FROM simba.entries q
                 WHERE q.tenant = p_tenant AND q.name = p_names[v_i] AND q.request = p_request;
            END IF;
        END IF;
    END LOOP;
    -- a new entry goes in, then one walk per queue grants what the rule grants (the walk
    -- before it is needed only where nothing is inserted, and by fits(), which reads the
    -- dead entries and the restart grace as the walk leaves them)
    IF v_mine OR p_try THEN
        FOR v_i IN 1 .. array_length(p_names, 1) LOOP
            PERFORM simba.settle(p_tenant, p_names[v_i], p_now, NULL);
        END LOOP;
    END IF;
    IF NOT v_mine THEN
        IF p_try AND NOT simba.fits(p_tenant, p_names, p_weights, p_now) THEN
            SELECT r.held, r.owner, r.capacity INTO o_held, o_owner, o_capacity
                FROM simba.resources r WHERE r.tenant = p_tenant AND r.name = p_names[1];
            o_fences := array_fill(0::bigint, ARRAY[array_length(p_names, 1)]); o_ahead := 0;
            o_grace_ms := COALESCE((SELECT GREATEST(0, ceil(extract(epoch FROM t.grace_until - p_now) * 1000))
                FROM simba.tenants t WHERE t.tenant = p_tenant AND t.grace_until > p_now), 0)::integer;
            RETURN;
        END IF;
        FOR v_i IN 1 .. array_length(p_names, 1) LOOP
            INSERT INTO simba.entries (tenant, name, seq, request, session, weight, watch, token)
                VALUES (p_tenant, p_names[v_i], v_seqs[v_i], p_request, p_session, p_weights[v_i], p_watch,
                        replace(gen_random_uuid()::text, '-', ''));
            PERFORM simba.settle(p_tenant, p_names[v_i], p_now, p_request);
        END LOOP;
    END IF;
    SELECT * INTO o_status, o_granted, o_fences, o_ahead, o_held, o_owner, o_recheck_ms, o_capacity,
        o_grace_ms, o_token FROM simba.state(p_tenant, p_session, p_request, p_names, p_now);
END $f$;
CREATE OR REPLACE FUNCTION simba.enqueue(p_tenant text, p_session text, p_request text, p_try boolean,
    p_watch boolean, p_names text[], p_caps integer[], p_weights integer[],
    OUT o_status integer, OUT o_granted boolean, OUT o_fences bigint[], OUT o_ahead integer,
    OUT o_held integer, OUT o_owner text, OUT o_recheck_ms integer, OUT o_capacity integer,
    OUT o_grace_ms integer, OUT o_token text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_n integer := array_length(p_names, 1); v_names bytea[];
    v_i integer; v_cap integer; v_fence bigint; v_made boolean := false;
BEGIN
    o_status := 0; o_granted := false; o_recheck_ms := -1; o_grace_ms := 0;
    FOR v_i IN 1 .. v_n LOOP v_names[v_i] := decode(p_names[v_i], 'hex'); END LOOP;
    WHILE v_n = 1 LOOP
        UPDATE simba.resources r SET seq = r.seq + 1, counter = simba.next_fence(r.counter, v_now),  -- simba_grant_fence
            held = 1, owner = p_session, h_seq = r.seq + 1, h_request = p_request, h_session = p_session,
            h_opened = x.opened, h_weight = p_weights[1], h_fence = simba.next_fence(r.counter, v_now),
            h_watch = p_watch, h_token = replace(gen_random_uuid()::text, '-', '') FROM simba.sessions x
        WHERE r.tenant = p_tenant AND r.name = v_names[1] AND r.h_session IS NULL AND p_weights[1] <= r.capacity
          AND r.seq = (SELECT y.seq FROM simba.resources y WHERE y.tenant = p_tenant AND y.name = v_names[1])
          AND NOT EXISTS (SELECT 1 FROM simba.entries q WHERE q.tenant = p_tenant AND q.name = v_names[1])
          AND EXISTS (SELECT 1 FROM simba.tenants t WHERE t.tenant = p_tenant
                      AND t.boot = (SELECT m.started FROM simba.run m
                                    WHERE m.postmaster = pg_catalog.pg_postmaster_start_time())
                      AND (t.grace_until IS NULL OR t.grace_until <= v_now))
          AND x.tenant = p_tenant AND x.session = p_session AND x.expires > v_now
        RETURNING r.counter, r.h_token, r.capacity INTO v_fence, o_token, v_cap;
        IF v_cap IS NOT NULL THEN
            IF p_watch THEN   -- the owner changed (an empty queue has none)
                PERFORM pg_notify(simba.channel(p_session), 'o - ' || encode(v_names[1], 'hex'));
            END IF;
            o_fences := ARRAY[v_fence]; o_granted := true; o_ahead := 0; o_held := 1; o_owner := p_session;
            o_capacity := v_cap;
            RETURN;
        END IF;
        EXIT WHEN v_made;
        PERFORM 1 FROM simba.resources r WHERE r.tenant = p_tenant AND r.name = v_names[1];
        EXIT WHEN FOUND;
        INSERT INTO simba.resources (tenant, name, capacity) SELECT p_tenant, v_names[1], p_caps[1]
            WHERE EXISTS (SELECT 1 FROM simba.sessions x WHERE x.tenant = p_tenant AND x.session = p_session
                          AND x.expires > v_now) ON CONFLICT DO NOTHING;
        v_made := true;
    END LOOP;
    SELECT * INTO o_status, o_granted, o_fences, o_ahead, o_held, o_owner, o_recheck_ms, o_capacity,
        o_grace_ms, o_token FROM simba.join_queue(p_tenant, p_session, p_request, p_try, p_watch, v_names,
                                                  p_caps, p_weights, v_now);
END $f$;
CREATE OR REPLACE FUNCTION simba.stale(p_tenant text, p_names bytea[], p_now timestamptz) RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $f$
DECLARE v_i integer; v_cap integer; v_held integer; v_ahead bigint; e record; v_dead boolean;
BEGIN
    FOR v_i IN 1 .. array_length(p_names, 1) LOOP
        SELECT r.capacity, r.held, r.h_session IS NOT NULL AND NOT EXISTS (SELECT 1 FROM simba.sessions s
                   WHERE s.tenant = r.tenant AND s.session = r.h_session
                     AND s.opened IS NOT DISTINCT FROM r.h_opened AND s.expires > p_now)
            INTO v_cap, v_held, v_dead FROM simba.resources r
            WHERE r.tenant = p_tenant AND r.name = p_names[v_i];
        CONTINUE WHEN NOT FOUND;
        IF v_dead THEN RETURN true; END IF;   -- a dead hold in the row
        v_ahead := 0;
        FOR e IN SELECT h.weight, h.fence, s.expires FROM
                     (SELECT q.seq, q.session, q.weight, q.fence FROM simba.entries q
                      WHERE q.tenant = p_tenant AND q.name = p_names[v_i] ORDER BY q.seq LIMIT v_held + 1) h
                 LEFT JOIN simba.sessions s ON s.tenant = p_tenant AND s.session = h.session ORDER BY h.seq LOOP
            IF e.expires IS NULL OR e.expires <= p_now THEN RETURN true; END IF;   -- dead
            v_ahead := v_ahead + simba.grant_weight(e.weight, v_cap);
            IF e.fence = 0 AND v_ahead <= v_cap THEN RETURN true; END IF;     -- grantable
        END LOOP;
    END LOOP;
    RETURN false;
END $f$;
CREATE OR REPLACE FUNCTION simba.poll(p_tenant text, p_session text, p_request text, p_names text[],
    OUT o_status integer, OUT o_granted boolean, OUT o_fences bigint[], OUT o_ahead integer,
    OUT o_held integer, OUT o_owner text, OUT o_recheck_ms integer, OUT o_capacity integer,
    OUT o_grace_ms integer, OUT o_token text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_names bytea[]; v_i integer;
BEGIN
    o_status := 0; o_granted := false; o_recheck_ms := -1; o_grace_ms := 0;
    IF NOT EXISTS (SELECT 1 FROM simba.sessions s
                   WHERE s.tenant = p_tenant AND s.session = p_session AND s.expires > v_now) THEN
        o_status := 1; RETURN;
    END IF;
    FOR v_i IN 1 .. array_length(p_names, 1) LOOP v_names[v_i] := decode(p_names[v_i], 'hex'); END LOOP;
    -- every writer leaves its queues settled; only time can make a holder (or the
    -- first waiter) dead: without one, the answer is read without a lock or a write
    IF simba.stale(p_tenant, v_names, v_now) THEN
        PERFORM simba.lock_all(p_tenant, v_names, NULL);
        FOR v_i IN 1 .. array_length(v_names, 1) LOOP
            PERFORM simba.settle(p_tenant, v_names[v_i], v_now, p_request);
        END LOOP;
    END IF;
    SELECT * INTO o_status, o_granted, o_fences, o_ahead, o_held, o_owner, o_recheck_ms, o_capacity,
        o_grace_ms, o_token FROM simba.state(p_tenant, p_session, p_request, v_names, v_now);
END $f$;
CREATE OR REPLACE FUNCTION simba.release(p_tenant text, p_session text, p_request text, p_names text[])
RETURNS integer LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
DECLARE
    v_now timestamptz := clock_timestamp(); v_name bytea; v_names bytea[] := ARRAY[decode(p_names[1], 'hex')];
    v_others boolean; v_moved boolean;
BEGIN
    IF array_length(p_names, 1) = 1 THEN   -- a hold in the row: only a one-resource request's
        UPDATE simba.resources r SET h_seq = NULL, h_request = NULL, h_session = NULL, h_opened = NULL,
                h_weight = NULL, h_fence = NULL, h_watch = NULL, h_token = NULL
            WHERE r.tenant = p_tenant AND r.name = v_names[1] AND r.h_request = p_request
              AND r.h_session = p_session;
        IF FOUND THEN RETURN 0; END IF;
    ELSE
        v_names := ARRAY(SELECT decode(x, 'hex') FROM unnest(p_names) AS x ORDER BY 1);
    END IF;
    -- in name order: each resource row locked before its queue changes, all held to the end
    FOREACH v_name IN ARRAY v_names LOOP
        -- the entry goes; the walk runs when another entry is left or came in since the
        -- snapshot (a boot it has not noticed waits for the next grant)
        WITH d AS (DELETE FROM simba.entries q WHERE q.tenant = p_tenant AND q.name = v_name
                   AND q.request = p_request AND q.session = p_session RETURNING q.seq)
        SELECT EXISTS (SELECT 1 FROM d JOIN simba.entries q ON q.tenant = p_tenant AND q.name = v_name
                       AND q.seq <> d.seq),
               r.seq <> (SELECT x.seq FROM simba.resources x WHERE x.tenant = p_tenant AND x.name = v_name)
            INTO v_others, v_moved FROM simba.resources r WHERE r.tenant = p_tenant AND r.name = v_name
            FOR UPDATE OF r;
        IF v_others OR v_moved THEN PERFORM simba.settle(p_tenant, v_name, v_now, NULL); END IF;
    END LOOP;
    RETURN 0;
END $f$;
CREATE OR REPLACE FUNCTION simba.inspect(p_tenant text, p_name text)
RETURNS TABLE (o_capacity integer, o_session text, o_fence bigint, o_weight integer,
               o_expires_in_ms bigint, o_renewed_ago_ms bigint, o_held_ms bigint, o_grace_ms bigint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
DECLARE
    v_now timestamptz := clock_timestamp(); v_name bytea := decode(p_name, 'hex'); v_cap integer;
    v_us bigint; v_grace bigint;
BEGIN
    SELECT r.capacity INTO v_cap FROM simba.resources r WHERE r.tenant = p_tenant AND r.name = v_name FOR UPDATE;
    IF NOT FOUND THEN RETURN; END IF;
    PERFORM simba.settle(p_tenant, v_name, v_now, NULL);
    DELETE FROM simba.entries q WHERE q.tenant = p_tenant AND q.name = v_name AND NOT EXISTS
        (SELECT 1 FROM simba.sessions s WHERE s.tenant = q.tenant AND s.session = q.session AND s.expires > v_now);
    v_us := (extract(epoch FROM v_now) * 1000000)::bigint;
    SELECT GREATEST(0, ceil(extract(epoch FROM t.grace_until - v_now) * 1000))::bigint INTO v_grace
        FROM simba.tenants t WHERE t.tenant = p_tenant AND t.grace_until > v_now;
    v_grace := COALESCE(v_grace, 0);
    RETURN QUERY SELECT v_cap, q.session, q.fence, q.weight, e.left_ms, s.lease_ms - e.left_ms,
        CASE WHEN q.fence = 0 THEN -1 WHEN q.fence <= v_us THEN (v_us - q.fence) / 1000 ELSE 0 END,
        v_grace
        FROM simba.entries q JOIN simba.sessions s ON s.tenant = q.tenant AND s.session = q.session
        CROSS JOIN LATERAL (SELECT LEAST(s.lease_ms, floor(extract(epoch FROM s.expires - v_now) * 1000))::bigint
                            AS left_ms) e
        WHERE q.tenant = p_tenant AND q.name = v_name ORDER BY q.seq;
    IF NOT FOUND THEN RETURN QUERY SELECT v_cap, NULL::text, 0::bigint, 0, -1::bigint, -1::bigint, -1::bigint, v_grace; END IF;
END $f$;
CREATE OR REPLACE FUNCTION simba.set_capacity(p_tenant text, p_name text, p_capacity integer) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
DECLARE v_now timestamptz := clock_timestamp(); v_name bytea := decode(p_name, 'hex');
BEGIN
    INSERT INTO simba.resources AS r (tenant, name, capacity) VALUES (p_tenant, v_name, p_capacity)
        ON CONFLICT (tenant, name) DO UPDATE SET capacity = EXCLUDED.capacity;
    PERFORM simba.unfold(p_tenant, v_name);
    PERFORM simba.bump_epoch(p_tenant);
    PERFORM pg_notify(simba.channel(w.session), 'c - ' || p_name)
        FROM (SELECT DISTINCT q.session FROM simba.entries q WHERE q.tenant = p_tenant AND q.name = v_name) w;
    PERFORM simba.settle(p_tenant, v_name, v_now, NULL);
    RETURN 0;
END $f$;
CREATE OR REPLACE FUNCTION simba.delete(p_tenant text, p_name text) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
DECLARE v_name bytea := decode(p_name, 'hex');
BEGIN
    PERFORM 1 FROM simba.resources r WHERE r.tenant = p_tenant AND r.name = v_name FOR UPDATE;
    PERFORM simba.unfold(p_tenant, v_name);
    PERFORM pg_notify(simba.channel(w.session), 'c - ' || p_name)
        FROM (SELECT DISTINCT q.session FROM simba.entries q WHERE q.tenant = p_tenant AND q.name = v_name) w;
    DELETE FROM simba.entries q WHERE q.tenant = p_tenant AND q.name = v_name;
    DELETE FROM simba.resources r WHERE r.tenant = p_tenant AND r.name = v_name;
    PERFORM simba.bump_epoch(p_tenant);
    RETURN 0;
END $f$;
