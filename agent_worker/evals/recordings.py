"""Recorded responses: ``DIR/recordings/<configuration>/<scenario>.json``, one file a scenario, written by
``--record`` and read by every run without it.

A file holds where its responses came from (``claude``, or the scenario's ``script``), the model, and each
exchange: the digest of the request the worker sent and the response it got. Only the digest of a request is
kept: a recording holds no copy of the prompt to go stale beside it, and comparing digests is all staleness
needs.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from agent_worker.evals.messages_api import Exchange, Key
from agent_worker.evals.scenario import RECORDINGS


def folder(suite: Path, config: str) -> Path:
    return suite / RECORDINGS / config


def read(suite: Path, config: str) -> dict[Key, list[Exchange]]:
    """Every scenario's recorded exchanges for ``config`` (none: an empty mapping, and each scenario will say it
    was not recorded)."""
    recorded: dict[Key, list[Exchange]] = {}
    for path in sorted(folder(suite, config).glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        recorded[config, path.stem] = [Exchange(e["request_digest"], e["response"]) for e in data["exchanges"]]
    return recorded


def write(suite: Path, config: str, scenario: str, source: str, exchanges: list[Exchange]) -> Path:
    path = folder(suite, config) / f"{scenario}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    models = sorted({str(e.response.get("model")) for e in exchanges})
    data = {
        "scenario": scenario,
        "configuration": config,
        "source": source,
        "models": models,
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "exchanges": [{"request_digest": e.request_digest, "response": e.response} for e in exchanges],
    }
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def prune(suite: Path, config: str, keep: set[str]) -> list[Path]:
    """Remove the recordings of scenarios no longer in the suite, after the whole suite was recorded anew: a file
    nobody replays would only mislead whoever reads the folder."""
    gone = [path for path in folder(suite, config).glob("*.json") if path.stem not in keep]
    for path in gone:
        path.unlink()
    return gone
