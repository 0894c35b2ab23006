# One Disque node. Build: docker build -t disque-py .
# Run:   docker run -p 7711:7711 -p 17711:17711 disque-py
# Behind NAT (published ports, other hosts), tell peers and clients how to reach
# the node: --cluster-announce-ip, --cluster-announce-port, --cluster-announce-bus-port.
FROM python:3.11-slim
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY client client
COPY disque disque
COPY disque_server disque_server
COPY disque_common disque_common
COPY disque_cli disque_cli
COPY disque_benchmark disque_benchmark
COPY disque_tui disque_tui
COPY disque_spark disque_spark
RUN pip install --no-cache-dir ./client . && mkdir /data
WORKDIR /data
VOLUME /data
# client port, cluster bus (port + 10000), Prometheus metrics (with --metrics-port 9711)
EXPOSE 7711 17711 9711
ENTRYPOINT ["disque-server", "--bind", "0.0.0.0", "--dir", "/data"]
