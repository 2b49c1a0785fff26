#!/bin/bash
# The runnel image's HEALTHCHECK: healthy when GET /ready on the broker's HTTP listener
# answers 200 (the broker serves Kafka clients; in a cluster, registered and unfenced).
# bash's /dev/tcp speaks the HTTP/1.0 request, so the image needs no curl or wget.
# With RUNNEL_HTTP_LISTEN=off there is no /ready: then a TCP connect to the Kafka
# listener is the check.
set -u

http="${RUNNEL_HTTP_LISTEN:-127.0.0.1:9644}"
if [ -z "$http" ] || [ "$http" = off ]; then
    exec 3<>"/dev/tcp/127.0.0.1/${RUNNEL_LISTEN##*:}"
    exit $?
fi
exec 3<>"/dev/tcp/127.0.0.1/${http##*:}" || exit 1
printf 'GET /ready HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
read -r -t 2 _version status _reason <&3 || exit 1
[ "$status" = 200 ]
