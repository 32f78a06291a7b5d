"""The ``agent-worker`` program: the command line (``main``) and what its commands run, among them the worker
process itself (``worker``), the embedded dev stack (``devserver``), the demo and the replayer."""
