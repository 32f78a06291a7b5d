"""The CLI's cold start: ``./dev run python -m bench.cold_start [--runs 7]``.

What a person or a script pays before a command does anything: ``agent-worker --help``, ``agent-worker tickets``
against a running dev server (a command that reads visibility and exits), and a worker process from its start
until it logs "worker started" (ready to poll). Each is a fresh process, timed from outside, ``--runs`` times
after one warm-up; the figure is the median, with ``python3 -c pass`` timed in the same run as the yardstick for
the interpreter's own start on this machine. ``farm-bench`` gives the same figures for a single command.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from agent_worker.devserver import SEARCH_ATTRIBUTE_ARGS, binary, free_port

AGENT_WORKER = str(Path(sys.executable).parent / "agent-worker")


def timed(command: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env={**os.environ, **(env or {})}, timeout=120)
    return time.perf_counter() - started


def until_started(command: list[str], env: dict[str, str]) -> float:
    """Seconds from spawning a worker until it logs that it polls; then it is stopped."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, **env}
    )
    assert process.stdout is not None
    try:
        for line in process.stdout:
            if "worker started" in line:
                return time.perf_counter() - started
        raise RuntimeError(f"the worker exited ({process.wait()}) without starting")
    finally:
        process.terminate()
        process.wait(timeout=60)


def median(samples: list[float]) -> str:
    return f"{statistics.median(samples):.2f} s (min {min(samples):.2f}, max {max(samples):.2f})"


def main(runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="cold-start-") as scratch:
        port = free_port()
        server = subprocess.Popen(
            [binary("temporal"), "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port),
             "--http-port", str(free_port()), "--metrics-port", str(free_port()), *SEARCH_ATTRIBUTE_ARGS,
             "--log-level", "error"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        env = {
            "TEMPORAL_ADDRESS": f"127.0.0.1:{port}",
            "AGENT_DATA_DIR": scratch,
            "AGENT_MODEL_BACKEND": "scripted",
            "AGENT_LOG_FORMAT": "console",
        }
        try:
            for _ in range(100):  # the server answers within a few seconds
                probe = subprocess.run(
                    [AGENT_WORKER, "tickets"], capture_output=True, env={**os.environ, **env}, check=False
                )
                if probe.returncode == 0:
                    break
                time.sleep(0.2)
            commands: dict[str, Callable[[], float]] = {
                "python3 -c pass (the interpreter alone)": lambda: timed([sys.executable, "-c", "pass"]),
                "agent-worker --help": lambda: timed([AGENT_WORKER, "--help"]),
                "agent-worker tickets": lambda: timed([AGENT_WORKER, "tickets"], env),
                "agent-worker worker, until it polls": lambda: until_started([AGENT_WORKER, "worker"], env),
            }
            print(f"Cold start, median of {runs} runs after one warm-up (wall clock):")
            for name, run in commands.items():
                run()
                print(f"  {name:<42} {median([run() for _ in range(runs)])}", flush=True)
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    main(parser.parse_args().runs)
    sys.stdout.flush()
    os._exit(0)  # temporalio may crash at interpreter exit (sdk-python issue 300); the work is done
