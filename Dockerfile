# The worker image: the locked dependencies, the three packages, and nothing else; runs as a non-root user.
FROM python:3.11.10-slim-bookworm AS build
ENV UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never
RUN pip install --no-cache-dir uv==0.13.9
WORKDIR /app
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --locked --no-dev --no-install-project
COPY agent_worker ./agent_worker
COPY activities ./activities
COPY workflows ./workflows
RUN uv sync --locked --no-dev --no-editable

FROM python:3.11.10-slim-bookworm
RUN useradd --create-home --uid 10001 agent
COPY --from=build /app/.venv /app/.venv
# PYTHONHASHSEED: every worker iterates a set of strings in one order (the replay gate checks two seeds alike).
ENV PATH=/app/.venv/bin:$PATH \
    PYTHONHASHSEED=0 \
    AGENT_DATA_DIR=/home/agent/data \
    AGENT_METRICS_BIND=0.0.0.0:9464
USER agent
WORKDIR /home/agent
EXPOSE 9464
# Healthy when the worker's metrics endpoint answers: the worker is up and connected to Temporal.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9464/metrics', timeout=2)"]
STOPSIGNAL SIGTERM
CMD ["agent-worker", "worker"]
