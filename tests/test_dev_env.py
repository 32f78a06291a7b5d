"""A newcomer's shell finds the commands the docs print: ``eval "$(./dev env)"`` puts the environment's
``agent-worker`` and ``temporal`` on PATH, from a shell that had neither."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


async def test_eval_dev_env_puts_agent_worker_and_temporal_on_a_bare_shells_path() -> None:
    script = f'eval "$("{sys.executable}" dev env)" && agent-worker --version && command -v temporal'
    process = await asyncio.create_subprocess_exec(
        "/bin/sh",
        "-c",
        script,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    version, temporal = out.decode().split()[-3:-1], out.decode().split()[-1]
    assert version[0] == "agent-worker"
    assert temporal == str(ROOT / ".venv" / "bin" / "temporal")
