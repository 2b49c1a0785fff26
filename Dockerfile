# runnel container image.
#
# The binary is built on the host (`cargo build --release`) and copied in, so the image
# builds without a registry: the base image `debian:bookworm-slim` can be produced
# locally (debootstrap + `docker import`) when no registry is reachable.
FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --home-dir /data runnel \
 && mkdir -p /data && chown runnel /data
COPY target/release/runnel /usr/local/bin/runnel
USER runnel
VOLUME /data
ENV RUNNEL_LISTEN=0.0.0.0:9092 \
    RUNNEL_DATA_DIR=/data \
    RUNNEL_LOG=info
EXPOSE 9092
# Healthy once the listener accepts connections.
HEALTHCHECK --interval=2s --timeout=1s --start-period=1s --retries=5 \
  CMD bash -c 'exec 3<>/dev/tcp/127.0.0.1/${RUNNEL_LISTEN##*:}' || exit 1
ENTRYPOINT ["/usr/local/bin/runnel"]
