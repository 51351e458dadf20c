"""The batch times' fit and the margin taken from the predictions' errors, on their own."""

from __future__ import annotations

import random

import pytest

from transformer_cli.serving.wait_prediction import (
    ERROR_QUANTILE,
    MAX_MARGIN,
    MIN_ERRORS,
    PRIOR_MARGIN,
    BatchTimes,
    WaitErrors,
)


def test_batch_times_fit_a_fixed_part_and_a_part_per_token():
    times = BatchTimes()
    assert times.predict(10) is None  # nothing timed yet
    for tokens in (20, 60, 20, 60, 40, 80):
        times.add(tokens, 0.1 + 0.01 * tokens)
    assert times.predict(50) == pytest.approx(0.6)
    assert times.predict(100, batches=2) == pytest.approx(2 * 0.1 + 1.0)


def test_batches_of_one_size_give_time_proportional_to_tokens():
    times = BatchTimes()
    for _ in range(5):
        times.add(40, 0.4)
    assert times.predict(80) == pytest.approx(0.8)


def test_the_margin_covers_the_recent_errors_but_never_shortens_a_prediction():
    errors = WaitErrors(bound_s=1.0)
    ratios = [random.Random(0).uniform(0.5, 1.9) for _ in range(MIN_ERRORS - 1)]
    for ratio in ratios:
        errors.add(0.8, 0.8 * ratio)
    assert errors.margin == PRIOR_MARGIN  # too few errors to go by
    for _ in range(50):
        errors.add(0.1, 5.0)  # predicted far below the bound: says nothing about waits near it
    assert errors.margin == PRIOR_MARGIN
    rng = random.Random(1)
    ratios = [rng.uniform(0.5, 1.9) for _ in range(200)]
    for ratio in ratios:
        errors.add(0.5, 0.5 * ratio)
    assert errors.margin == pytest.approx(sorted(ratios)[int(ERROR_QUANTILE * 200)])
    for _ in range(200):
        errors.add(0.5, 0.25)  # all answered in half the predicted time
    assert errors.margin == 1.0
    for _ in range(200):
        errors.add(0.5, 10.0)
    assert errors.margin == MAX_MARGIN
