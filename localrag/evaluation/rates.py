"""A rate with its denominator said and its bootstrap interval: how answer-level figures are reported.

A rate is judged questions with the property over judged questions; the questions that could not be judged (an
unreadable reply, a call limit, a stopped server) are counted beside it and never enter either number, so a report
can say "0.62 (31 of 50; 3 not judged)" and never shows NaN or a silent 0. The interval is the percentile bootstrap
(Efron & Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 13) of the mean of the judged 0/1 values, drawn
with a seeded numpy Generator so that equal inputs give equal intervals; numpy draws all resamples at once (a
10,000 x 63 matrix takes milliseconds), so no library is needed for it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 0
DEFAULT_ALPHA = 0.05


@dataclass(frozen=True)
class Rate:
    """`count` of `judged` questions have the property; `unjudged` more could not be judged. `value` is None when
    nothing was judged (never NaN); `low`/`high` the bootstrap interval (None with `value`)."""
    count: int
    judged: int
    unjudged: int
    value: float | None
    low: float | None
    high: float | None

    def text(self) -> str:
        """`0.620 [0.480, 0.760] (31 of 50; 3 not judged)`, or `no question judged (3 not judged)`."""
        unjudged = f"; {self.unjudged} not judged" if self.unjudged else ""
        if self.value is None:
            return f"no question judged ({self.unjudged} not judged)" if self.unjudged else "no question"
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}] ({self.count} of {self.judged}{unjudged})"


def bootstrap_interval(values: Sequence[float], resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                       alpha: float = DEFAULT_ALPHA) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of `values` (at least one), at level 1 - alpha."""
    import numpy as np

    if not values:
        raise ValueError("a bootstrap interval needs at least one value")
    data = np.asarray(values, dtype=float)
    draws = np.random.default_rng(seed).integers(0, len(data), size=(resamples, len(data)))
    means = data[draws].mean(axis=1)
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def rate(flags: Sequence[bool | None], resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
         alpha: float = DEFAULT_ALPHA) -> Rate:
    """The rate of True among `flags`, None meaning a question that could not be judged."""
    judged = [bool(flag) for flag in flags if flag is not None]
    unjudged = len(flags) - len(judged)
    if not judged:
        return Rate(0, 0, unjudged, None, None, None)
    low, high = bootstrap_interval(judged, resamples, seed, alpha)
    return Rate(sum(judged), len(judged), unjudged, sum(judged) / len(judged), low, high)
