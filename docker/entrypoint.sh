#!/bin/sh
# The runnel image's entrypoint: exec the broker with the container's arguments.
#
# When RUNNEL_ADVERTISED_LISTENER_FILE is set, first wait until that file is non-empty and
# advertise its content (host:port). This is for harnesses that publish the container's
# port to a random host port and learn that port only after the container started
# (testcontainers does this: see compat-tests/rust/src/container.rs): they write the file
# with `docker exec`, and clients that bootstrap on host:<mapped port> are then told to
# reconnect to that same reachable address instead of the container's own.
# Gives up after RUNNEL_ADVERTISED_LISTENER_WAIT_S seconds (default 60).
set -eu

file="${RUNNEL_ADVERTISED_LISTENER_FILE:-}"
if [ -n "$file" ]; then
    echo "runnel: waiting for the advertised listener in $file" >&2
    ticks=$(( ${RUNNEL_ADVERTISED_LISTENER_WAIT_S:-60} * 50 ))
    while [ ! -s "$file" ]; do
        ticks=$((ticks - 1))
        if [ "$ticks" -le 0 ]; then
            echo "runnel: nothing was written to $file; giving up" >&2
            exit 1
        fi
        sleep 0.02
    done
    RUNNEL_ADVERTISED_LISTENER="$(cat "$file")"
    export RUNNEL_ADVERTISED_LISTENER
fi

exec /usr/local/bin/runnel "$@"
