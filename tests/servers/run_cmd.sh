# tests/servers/run_cmd.sh -- how redis.sh, mysql.sh and zk.sh run the
# command they were given, once their servers are up. Sourced by them.
#
#   run_cmd CMD [ARG...]   runs CMD, returns its exit status
#
# bash runs a trap only after the foreground command it waits for has ended,
# so a script that ran CMD in the foreground ignored SIGTERM (and INT, HUP)
# for as long as CMD ran: its servers and CMD lived on. CMD runs in the
# background instead, and the script waits for it: `wait` returns as soon as
# a trapped signal arrives, the trap ends CMD and exits, and the EXIT trap
# stops the servers. CMD keeps the script's standard input.

simba__cmd_pid=

run_cmd() {
    "$@" 0<&0 &
    simba__cmd_pid=$!
    wait "$simba__cmd_pid"
}

# The trap of INT, TERM and HUP: CMD ends with the script.
run_cmd_stop() {
    if [ -n "$simba__cmd_pid" ]; then
        kill -TERM "$simba__cmd_pid" 2>/dev/null
        wait "$simba__cmd_pid" 2>/dev/null
    fi
    exit 130
}
