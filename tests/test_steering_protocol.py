"""The steering measurement's protocol object (empirical.llm.SteeringProtocol): one validated home
for every choice of a measurement, the source of ``raptor steer``'s defaults (the recipe for a new steering option,
docs/architecture.md)."""
from __future__ import annotations

import dataclasses

import pytest

from empirical.llm._steering_protocol import MIN_CONTROL, MIN_RANDOM, SteeringProtocol


def test_raptor_steer_takes_its_defaults_from_the_protocol():
    from empirical.cli import build_parser

    args = build_parser().parse_args(["steer", "--dataset", "stsa"])
    default = SteeringProtocol()
    assert (args.stem, args.n_random, args.seed, args.generate, args.max_new_tokens) == (
        default.stem, default.n_random, default.seed, default.n_generate, default.max_new_tokens)


@pytest.mark.parametrize("field, value, message", [
    ("stem", "  ", r"stem \(--stem\)"),
    ("directions", ("up",), r"directions \(--direction\)"),
    ("directions", 3.0, r"directions \(--direction\)"),
    ("n_random", MIN_RANDOM - 2, r"n_random \(--n-random\)"),
    ("n_random", MIN_RANDOM + 1, r"n_random \(--n-random\) must be even"),
    ("n_random_selection", MIN_CONTROL + 1, r"n_random_selection .* must be even"),
    ("n_random_selection", 1000, r"at most n_random"),
    ("seed", -1, r"seed \(--seed\)"),
    ("n_generate", -1, r"n_generate \(--generate\)"),
    ("max_new_tokens", 0, r"max_new_tokens \(--max-new-tokens\)"),
    ("batch_size", 2.5, r"batch_size"),
    ("n_candidates", 0, r"n_candidates"),
    ("n_twins", -1, r"n_twins"),
    ("stage2_positions", ("answer",), r"stage2_positions"),
    ("twin_methods", [1], r"twin_methods"),
])
def test_every_field_is_checked_and_named(field, value, message):
    with pytest.raises((ValueError, TypeError), match=message):  # the contract's vocabulary: either, naming it
        SteeringProtocol(**{field: value})


def test_the_protocol_is_frozen_and_normalized():
    protocol = SteeringProtocol(directions="towards", stage2_positions=["all"], twin_methods="RAPTOR")
    assert protocol.directions == ("towards",) and protocol.stage2_positions == ("all",)
    assert protocol.twin_methods == ("RAPTOR",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        protocol.n_random = 10
    assert protocol.n_control(staged=True) == protocol.n_random_selection
    assert protocol.n_control(staged=False) == protocol.n_random
