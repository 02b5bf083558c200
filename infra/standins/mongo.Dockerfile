# Stand-in for mongo:<version>: FerretDB (MongoDB wire protocol) on SQLite, data in /data/db.
FROM debian:bookworm-slim
COPY ferretdb /usr/local/bin/ferretdb
RUN mkdir -p /data/db /data/configdb
VOLUME ["/data/db", "/data/configdb"]
EXPOSE 27017
ENTRYPOINT ["ferretdb", "--handler=sqlite", "--sqlite-url=file:/data/db/", "--state-dir=/data/db", "--listen-addr=:27017", "--telemetry=disable", "--debug-addr=-", "--log-level=warn"]
