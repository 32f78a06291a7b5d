"""What a benchmark that alternates systems round by round may claim (``bench.peers``): the order each round
runs them in, and the verdict on one system's figure over another's, taken as a ratio within each round.

A median of ratios can flip on a rerun when the rounds disagree; a verdict cannot, because it is given only when
every round agrees. It lives here, beside the tests' other support, so the property tests can check the rule the
bench prints by (the tests import nothing from ``bench/``).
"""

from __future__ import annotations

from collections.abc import Sequence

NOISE = 0.03
"""How far from 1 every round's ratio must lie before the bench calls one system cheaper or faster than another."""

FEWEST_ROUNDS = 5
"""Fewer rounds than this give no verdict at all: a spread of two or three values is not a spread."""


def verdict(ratios: Sequence[float]) -> str:
    """What ours-over-a-peer ratios, one per round, allow the bench to say: "lower" or "higher" only when every
    round agrees by more than ``NOISE``; anything else is "within noise", and a handful of rounds says nothing."""
    if len(ratios) < FEWEST_ROUNDS:
        return "too few rounds"
    if max(ratios) < 1 - NOISE:
        return "lower"
    if min(ratios) > 1 + NOISE:
        return "higher"
    return "within noise"


def rotated(keys: list[str], by: int) -> list[str]:
    """Round ``by``'s order: each system goes first in turn, so none always runs on a server the others warmed."""
    return keys[by % len(keys) :] + keys[: by % len(keys)] if keys else keys
