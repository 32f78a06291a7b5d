# The project's images: the locked dependencies, the three packages, and nothing else; each runs as a non-root user.
# The worker's image (the default target, the last below; also `agent-worker migrate` and the operator's commands)
# carries the worker alone. Each other program has a target of its own with its extra (pyproject.toml):
#   docker build -t agent-worker .                                   # the worker
#   docker build --target inbox -t agent-worker-inbox .              # likewise mail-in, codec-server
FROM python:3.11.10-slim-bookworm AS build
ENV UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never
RUN pip install --no-cache-dir uv==0.13.9
WORKDIR /app
COPY pyproject.toml uv.lock README.md ./
# Every program's dependencies in one layer that source changes leave alone; each target's sync below keeps its own.
RUN uv sync --locked --no-dev --no-install-project --all-extras
COPY agent_worker ./agent_worker
COPY activities ./activities
COPY workflows ./workflows

# uv sync is exact: it removes what the target's extras do not name.
FROM build AS build-worker
RUN uv sync --locked --no-dev --no-editable

FROM build AS build-inbox
RUN uv sync --locked --no-dev --no-editable --extra inbox

FROM build AS build-mail-in
RUN uv sync --locked --no-dev --no-editable --extra mail-in

FROM build AS build-codec-server
RUN uv sync --locked --no-dev --no-editable --extra codec-server

# What every program's image shares: the user it runs as, where its commands and data are.
FROM python:3.11.10-slim-bookworm AS program
RUN useradd --create-home --uid 10001 agent
ENV PATH=/app/.venv/bin:$PATH \
    AGENT_DATA_DIR=/home/agent/data
WORKDIR /home/agent
STOPSIGNAL SIGTERM

# The approval inbox; its health check is the compose file's and its probes the manifests' (GET /healthz).
FROM program AS inbox
COPY --from=build-inbox /app/.venv /app/.venv
USER agent
EXPOSE 8088
CMD ["agent-worker", "web"]

# The codec server; it answers POST only, to callers with a token, so its health check is a connection (compose).
FROM program AS codec-server
COPY --from=build-codec-server /app/.venv /app/.venv
USER agent
EXPOSE 8081
CMD ["agent-worker", "codec-server", "--host", "0.0.0.0", "--port", "8081"]

# The mail receiver: healthy when its metrics endpoint answers (agent_mail_in_messages), as the worker's.
FROM program AS mail-in
COPY --from=build-mail-in /app/.venv /app/.venv
ENV AGENT_METRICS_BIND=0.0.0.0:9464
USER agent
EXPOSE 8024 9464
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9464/metrics', timeout=2)"]
CMD ["agent-worker", "mail-in"]

# The worker. PYTHONHASHSEED fixed: the order of a set of strings is then the same in every worker process, as the
# workflow's commands must be on every worker that replays them.
FROM program AS worker
COPY --from=build-worker /app/.venv /app/.venv
ENV AGENT_METRICS_BIND=0.0.0.0:9464 \
    PYTHONHASHSEED=0
USER agent
EXPOSE 9464
# Healthy when the worker's metrics endpoint answers: the worker is up and connected to Temporal.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9464/metrics', timeout=2)"]
CMD ["agent-worker", "worker"]
