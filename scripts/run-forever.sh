#!/usr/bin/env bash
# Run a command, and start it again whenever it exits, until this script is told to stop.
#
#   scripts/run-forever.sh NAME CMD [ARGS...]
#
# `make run` wraps every Procfile line in it: honcho stops all processes as soon as one exits,
# so one worker crash used to end the whole system. Wrapped, a crash costs that process a
# restart, logged with its exit status. Restarts back off (1 s doubling to 30 s) while the
# command keeps dying quickly, and start at 1 s again once it ran for a minute.
#
# SIGTERM or SIGINT (honcho's Ctrl-C sends SIGTERM to the process group) stop the command
# with SIGTERM, wait for it, and exit: nothing is restarted while stopping.
# In production use a real supervisor (systemd, supervisord): docs/operations.md.
set -u

if [ "$#" -lt 2 ]; then
    echo "usage: $0 NAME CMD [ARGS...]" >&2
    exit 2
fi
name="$1"
shift

BACKOFF_MIN="${RUN_FOREVER_BACKOFF_MIN:-1}"
BACKOFF_MAX="${RUN_FOREVER_BACKOFF_MAX:-30}"
HEALTHY_AFTER="${RUN_FOREVER_HEALTHY_AFTER:-60}"

stopping=0
child=""

log() { echo "run-forever[$name]: $*" >&2; }

stop() {
    stopping=1
    if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
        kill -TERM "$child" 2>/dev/null
    fi
}
trap stop TERM INT

delay="$BACKOFF_MIN"
while [ "$stopping" -eq 0 ]; do
    started=$SECONDS
    # In the background, so that the trap runs at once instead of after the child exits.
    "$@" &
    child=$!
    # `wait` returns early when a trapped signal arrives: wait again until the child is gone.
    while :; do
        wait "$child"
        status=$?
        kill -0 "$child" 2>/dev/null || break
    done
    child=""
    [ "$stopping" -eq 0 ] || break
    ran=$((SECONDS - started))
    if [ "$ran" -ge "$HEALTHY_AFTER" ]; then
        delay="$BACKOFF_MIN"
    fi
    log "exited with status $status after ${ran}s; restarting in ${delay}s"
    # The sleep is interruptible too: a stop during the back-off ends the loop.
    sleep "$delay" &
    wait $! 2>/dev/null
    delay=$((delay * 2))
    [ "$delay" -le "$BACKOFF_MAX" ] || delay="$BACKOFF_MAX"
done
log "stopped"
exit 0
