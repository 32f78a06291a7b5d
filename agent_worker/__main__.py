"""``python -m agent_worker``: the same as the ``agent-worker`` command."""

from agent_worker.cli.main import main

main()
