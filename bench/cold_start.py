"""The CLI's cold start: ``./dev run python -m bench.cold_start [--runs 7]``.

What a person or a script pays before a command does anything: ``agent-worker --help``, ``agent-worker tickets``
against a running dev server (a command that reads visibility and exits), and a worker process from its start
until it logs "worker started" (ready to poll). Each is a fresh process, timed from outside, ``--runs`` times
after one warm-up; the figure is the median, with ``python3 -c pass`` timed in the same run as the yardstick for
the interpreter's own start on this machine. With ``--baseline PATH/TO/agent-worker`` (another checkout's, such
as the commit before a change), each command is also run with that one, in turn with this one, and the ratio
of the medians is printed: the two are measured under the same load. ``farm-bench`` gives the same figures for
a single command.
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

from agent_worker.cli.devserver import SEARCH_ATTRIBUTE_ARGS, binary, free_port
from agent_worker.exits import exit_hard

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


def commands(env: dict[str, str]) -> dict[str, Callable[[str], float]]:
    """Each measured command, given the ``agent-worker`` executable to run it with. Each executable has a data
    folder of its own: an older checkout refuses a business database a newer one has migrated."""

    def own(exe: str) -> dict[str, str]:
        return {**env, "AGENT_DATA_DIR": str(Path(env["AGENT_DATA_DIR"]) / str(abs(hash(exe))))}

    return {
        "agent-worker --help": lambda exe: timed([exe, "--help"]),
        "agent-worker tickets": lambda exe: timed([exe, "tickets"], own(exe)),
        "agent-worker worker, until it polls": lambda exe: until_started([exe, "worker"], own(exe)),
    }


def median(samples: list[float]) -> str:
    return f"{statistics.median(samples):.2f} s (min {min(samples):.2f}, max {max(samples):.2f})"


def main(runs: int, baseline: str | None) -> None:
    with tempfile.TemporaryDirectory(prefix="cold-start-") as scratch:
        port = free_port()
        server = subprocess.Popen(
            [
                binary("temporal"),
                "server",
                "start-dev",
                "--headless",
                "--ip",
                "127.0.0.1",
                "--port",
                str(port),
                "--http-port",
                str(free_port()),
                "--metrics-port",
                str(free_port()),
                *SEARCH_ATTRIBUTE_ARGS,
                "--log-level",
                "error",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
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
            print(f"Cold start, median of {runs} runs after one warm-up (wall clock):")
            interpreter = [timed([sys.executable, "-c", "pass"]) for _ in range(runs)]
            print(f"  {'python3 -c pass (the interpreter alone)':<40} {median(interpreter)}")
            for name, run in commands(env).items():
                for warm_up in [AGENT_WORKER, *([baseline] if baseline else [])]:
                    run(warm_up)
                these: list[float] = []
                befores: list[float] = []
                for _ in range(runs):
                    these.append(run(AGENT_WORKER))
                    if baseline:
                        befores.append(run(baseline))
                line = f"  {name:<40} {median(these)}"
                if baseline:
                    ratio = statistics.median(these) / statistics.median(befores)
                    line += f"; baseline {median(befores)}; ratio {ratio:.2f}"
                print(line, flush=True)
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline", help="another checkout's agent-worker, run in turn with this one")
    options = parser.parse_args()
    main(options.runs, options.baseline)
    exit_hard(0)
