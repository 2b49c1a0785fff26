# runnel container image: a single-node broker on 0.0.0.0:9092, data in the /data volume,
# /health, /ready and /metrics on 0.0.0.0:9644.
#
#   docker/build-image.sh                      # builds runnel on the host, then this image
#   docker run -p 9092:9092 -p 9644:9644 runnel:dev
#                                              # clients bootstrap on 127.0.0.1:9092,
#                                              # Prometheus scrapes 127.0.0.1:9644/metrics
#
# Not multi-stage on purpose: a Rust builder image would have to be pulled, and the
# project's machines reach no container registry. The binary is built on the host
# (`cargo build --release`, Debian 12 / glibc 2.36, the same as the base image) and copied
# in. BASE_IMAGE defaults to debian:bookworm-slim; docker/base-image.sh produces that tag
# locally (debootstrap --variant=minbase + `docker import`) where nothing can be pulled.
#
# Configuration is the broker's RUNNEL_* environment (see config/runnel.yaml), e.g.
#   RUNNEL_ADVERTISED_LISTENER=host:port   what clients are told to reconnect to
#   RUNNEL_NODE_ID, RUNNEL_CLUSTER_ID, RUNNEL_NUM_PARTITIONS, RUNNEL_FLUSH_MODE, RUNNEL_LOG
# and, for a cluster on a Docker network (see compat-tests/rust/src/cluster.rs):
#   RUNNEL_CONTROLLER_QUORUM_VOTERS, RUNNEL_CONTROLLER_LISTEN=0.0.0.0:9093,
#   RUNNEL_INTER_BROKER_LISTEN=0.0.0.0:9094 and RUNNEL_INTER_BROKER_ADVERTISED_LISTENER=
#   <name on the network>:9094 (the brokers replicate there; clients use 9092)
# and, for harnesses that learn the published port only after start (testcontainers):
#   RUNNEL_ADVERTISED_LISTENER_FILE=/tmp/x  wait until that file holds host:port and
#                                           advertise it (see docker/entrypoint.sh).
# Logs go to stderr; the ready line `runnel ready: listening on IP:PORT` to stdout.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

RUN useradd --system --uid 10001 --user-group --home-dir /data --no-create-home runnel \
 && mkdir -p /data && chown runnel:runnel /data

COPY docker/entrypoint.sh /usr/local/bin/runnel-entrypoint
COPY docker/healthcheck.sh /usr/local/bin/runnel-healthcheck
COPY target/release/runnel /usr/local/bin/runnel

USER runnel
WORKDIR /data
VOLUME /data
ENV RUNNEL_LISTEN=0.0.0.0:9092 \
    RUNNEL_HTTP_LISTEN=0.0.0.0:9644 \
    RUNNEL_DATA_DIR=/data \
    RUNNEL_LOG=info
EXPOSE 9092 9644
# Healthy while GET /ready answers 200 (bash's /dev/tcp speaks HTTP: no extra package).
HEALTHCHECK --interval=2s --timeout=2s --start-period=1s --retries=5 \
  CMD ["/usr/local/bin/runnel-healthcheck"]
# runnel is PID 1 (the entrypoint execs it) and stops cleanly on SIGTERM (`docker stop`).
ENTRYPOINT ["/usr/local/bin/runnel-entrypoint"]
