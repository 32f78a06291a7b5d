"""Defaults the command line shows before it imports anything heavy: the dev server's ports, the codec server's,
the kinds of wait ``agent-worker tickets --waiting-for`` lists (``agent_worker.tickets.WAITING_FOR``), and the
JWT algorithms the codec server accepts (settings validate against them without importing a JWT library)."""

from __future__ import annotations

DEFAULT_PORT = 7233
DEFAULT_UI_PORT = 8233
DEFAULT_CODEC_PORT = 8081
WAITING_KINDS = ("approval", "customer", "event")

ASYMMETRIC_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
"""The algorithms a JWT may be signed with: an identity provider signs with a private key and publishes the
public one. ``none`` and ``HS*`` are left out on purpose (see the module's docstring)."""
