"""The rule that decides what ``bench.peers`` may claim: a system is called cheaper or dearer than another only when
every round's ratio says so by more than the noise, never on a median that a rerun could flip."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.support.verdicts import FEWEST_ROUNDS, NOISE, rotated, verdict

ratios = st.lists(st.floats(min_value=0.2, max_value=5, allow_nan=False), min_size=FEWEST_ROUNDS, max_size=30)


@given(ratios)
def test_a_verdict_is_given_only_when_every_round_agrees_beyond_the_noise(values: list[float]) -> None:
    said = verdict(values)
    if said == "lower":
        assert all(v < 1 - NOISE for v in values)
    elif said == "higher":
        assert all(v > 1 + NOISE for v in values)
    else:
        assert said == "within noise"
        assert not all(v < 1 - NOISE for v in values)
        assert not all(v > 1 + NOISE for v in values)


@given(ratios, st.floats(min_value=1 - NOISE, max_value=1 + NOISE))
def test_one_round_within_the_noise_leaves_no_verdict_however_far_the_others_are(
    values: list[float], level: float
) -> None:
    assert verdict([*values, level]) == "within noise"


def test_the_median_alone_never_decides() -> None:
    """Six rounds clearly cheaper and one clearly dearer: the median says 0.8, a rerun might not."""
    assert verdict([0.8] * 6 + [1.2]) == "within noise"
    assert verdict([0.8] * FEWEST_ROUNDS) == "lower"
    assert verdict([1.2] * FEWEST_ROUNDS) == "higher"


@given(st.lists(st.floats(min_value=0.01, max_value=0.5), min_size=0, max_size=FEWEST_ROUNDS - 1))
def test_too_few_rounds_say_nothing_however_clear_they_look(values: list[float]) -> None:
    assert verdict(values) == "too few rounds"


@given(st.lists(st.text(min_size=1), min_size=1, max_size=6, unique=True))
def test_over_as_many_rounds_as_systems_each_system_goes_first_once_and_every_round_runs_them_all(
    systems: list[str],
) -> None:
    orders = [rotated(systems, n) for n in range(len(systems))]
    assert sorted(order[0] for order in orders) == sorted(systems)
    assert all(sorted(order) == sorted(systems) for order in orders)
