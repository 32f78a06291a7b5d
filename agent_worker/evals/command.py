"""``agent-worker eval DIR``: run a suite, print its table, write its JSON, exit 1 if anything failed.

Exit codes: 0 every scenario passed; 1 one failed (a broken expectation, a stale recording, a ticket that did not
end); 2 the request was refused before anything ran (a scenario file or configuration that does not read, a
source that cannot answer).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from activities.contracts.fields import describe_errors
from agent_worker.evals import recordings
from agent_worker.evals.messages_api import CannotAnswerError, Claude, MessagesAPI, Recorded, Scripted, Source
from agent_worker.evals.report import Judged, side_by_side, table
from agent_worker.evals.runner import DEFAULT_CONFIG, Configuration, Ran, Runner, scratch_folder
from agent_worker.evals.scenario import Scenario, ScenarioError, suite


def run(args: argparse.Namespace) -> int:
    try:
        scenarios, configs = requested(args)
        source = choose_source(args, scenarios, configs)
    except (ScenarioError, ValueError, CannotAnswerError) as error:
        print(f"agent-worker eval: {error}", file=sys.stderr)
        return 2
    return asyncio.run(_run(args, scenarios, configs, source))


def requested(args: argparse.Namespace) -> tuple[list[Scenario], list[Configuration]]:
    """The scenarios and configurations asked for, every file read and checked before anything starts."""
    from agent_worker import wiring  # noqa: PLC0415 - as in _run

    scenarios = suite(args.dir, args.only)
    configs = [Configuration.read(p) for p in args.compare] if args.compare else [Configuration(DEFAULT_CONFIG)]
    if args.compare and configs[0].name == configs[1].name:
        raise ScenarioError(f"--compare: both configurations are named {configs[0].name!r}")
    if args.parallel < 1:
        raise ScenarioError("--parallel must be at least 1")
    for config in configs:
        try:
            wiring.money_policy(config.settings())
        except ValidationError as error:
            raise ScenarioError(f"configuration {config.name!r}: {describe_errors(error)}") from None
        except wiring.PolicyRefusedError as refused:
            raise ScenarioError(f"configuration {config.name!r}: {refused.reason}") from None
    return scenarios, configs


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """The dev server prints its banner on the standard output it inherits from this process: it gets the
    standard error instead, so that standard output holds the table alone."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def choose_source(args: argparse.Namespace, scenarios: list[Scenario], configs: list[Configuration]) -> Source:
    model = args.model or ("claude" if args.record else "recorded")
    if model == "recorded":
        if args.record:
            raise ScenarioError("--record stores new responses: say where from, --model claude or --model script")
        stored = {}
        for config in configs:
            stored.update(recordings.read(args.dir, config.name))
        return Recorded(stored)
    if model == "script":
        unscripted = [s.name for s in scenarios if not s.script]
        if unscripted:
            raise ScenarioError(f"--model script: no script: in {', '.join(unscripted)}")
        return Scripted({s.name: s for s in scenarios})
    return Claude()


async def _run(
    args: argparse.Namespace, scenarios: list[Scenario], configs: list[Configuration], source: Source
) -> int:
    from agent_worker import logs, wiring  # noqa: PLC0415
    from agent_worker.cli.commands import settings  # noqa: PLC0415
    from agent_worker.cli.devserver import start_dev_server  # noqa: PLC0415

    current = settings()
    # Twenty-five tickets' worth of info lines would bury the table: warnings and errors only, on stderr.
    logs.configure("WARNING", current.log_format)
    started = time.monotonic()
    api = await MessagesAPI(source).start()
    with stdout_to_stderr():
        env = await start_dev_server(None, data_converter=wiring.data_converter(current))
    gate = asyncio.Semaphore(args.parallel)
    try:
        with scratch_folder() as scratch:
            runner = Runner(env.client, api, Path(scratch), timeout_seconds=args.timeout)

            async def one(scenario: Scenario, config: Configuration) -> Judged:
                async with gate:
                    try:
                        return Judged.of(await runner.run(scenario, config))
                    except Exception as error:  # noqa: BLE001 - one scenario's failure is its row, not the suite's end
                        why = f"the eval could not run it: {type(error).__name__}: {error}"
                        return Judged.of(Ran(scenario, config.name, error=why))

            results = await asyncio.gather(*(one(s, c) for c in configs for s in scenarios))
    finally:
        await env.shutdown()
        await api.stop()
    wall = time.monotonic() - started
    by_config = [[r for r in results if r.ran.config == c.name] for c in configs]
    print(side_by_side(by_config[0], by_config[1], wall) if len(configs) == 2 else table(results, wall))
    if args.record:
        for r in results:
            exchanges = api.exchanges.get((r.ran.config, r.ran.scenario.name), [])
            if r.ran.refused is None and exchanges:
                recordings.write(args.dir, r.ran.config, r.ran.scenario.name, source.name, exchanges)
        if not args.only:
            for config in configs:
                recordings.prune(args.dir, config.name, {s.name for s in scenarios})
        print(f"recorded under {recordings.folder(args.dir, '*')}", file=sys.stderr)
    if args.json is not None:
        document = {
            "source": source.name,
            "configurations": [c.name for c in configs],
            "passed": all(r.passed for r in results),
            "results": [r.as_json() for r in results],
        }
        args.json.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return 0 if all(r.passed for r in results) else 1
