"""Tests for localrag/evaluation/rates.py: denominators said, unjudged counted apart, the bootstrap interval equal
to a plain loop over the same seeded draws."""
from __future__ import annotations

import numpy as np
import pytest

from localrag.evaluation.rates import Rate, bootstrap_interval, rate


def test_unjudged_questions_are_counted_apart_and_never_enter_the_rate():
    found = rate([True, None, False, True, None], resamples=200)
    assert (found.count, found.judged, found.unjudged, found.value) == (2, 3, 2, pytest.approx(2 / 3))
    assert found.text().endswith("(2 of 3; 2 not judged)")
    nothing = rate([None, None])
    assert nothing == Rate(0, 0, 2, None, None, None)
    assert nothing.text() == "no question judged (2 not judged)"
    assert rate([]).text() == "no question"


def test_a_constant_sample_has_a_point_interval_and_the_text_shows_three_decimals():
    assert rate([True] * 4).text() == "1.000 [1.000, 1.000] (4 of 4)"
    assert bootstrap_interval([0.0]) == (0.0, 0.0)


def test_the_interval_equals_a_loop_over_the_same_draws():
    values = [1, 0, 0, 1, 1, 1, 0, 1, 0, 1]
    draws = np.random.default_rng(7).integers(0, len(values), size=(500, len(values)))
    means = sorted(sum(values[i] for i in row) / len(values) for row in draws)
    expected = tuple(float(np.quantile(means, q)) for q in (0.025, 0.975))
    assert bootstrap_interval(values, resamples=500, seed=7) == expected
    assert expected == (0.3, 0.9)  # around the observed 6 of 10


def test_an_empty_sample_has_no_interval():
    with pytest.raises(ValueError, match="at least one value"):
        bootstrap_interval([])
