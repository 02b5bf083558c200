# Stand-in for prom/prometheus:<version>: that Prometheus, built from its Go module (without the
# web UI's assets: the HTTP API is whole), laid out as the official image is.
FROM debian:bookworm-slim
COPY prometheus /bin/prometheus
RUN mkdir -p /prometheus /etc/prometheus && chown nobody:nogroup /prometheus
USER nobody
WORKDIR /prometheus
EXPOSE 9090
VOLUME ["/prometheus"]
ENTRYPOINT ["/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
