"""How long a queued request will wait: the batches' times, fitted (`BatchTimes`), and how far
the waits predicted from them fell short of what admitted requests then waited
(`WaitErrors`), the margin admission control puts on a prediction so that the requests it
admits are answered within serve.max_pending_s, not only on average.

Why the margin: a batch's time depends on what it holds (the longest sentence sets the number
of decoding steps) and on what else takes the CPU, so a prediction from the recent batches is
right on average but scattered around it. Logged per request in a development build under
wrk at 64 connections on the 2-core EPYC (beam 5, base.yaml's model, one decoding thread), the
waits of admitted requests ran from 0.5 to 1.9 times their prediction, about half above it.
Measured with benchmarks/serve_wrk.py, admitting every request predicted just within the
bound let 384 of 958 admitted requests answer after it, 16 of 991 with the margin
(docs/results.md, "Admitted within the bound").
"""

from __future__ import annotations

from collections import deque

TIME_WEIGHT = 0.25  # the latest batch's weight in the fitted batch times: a change shows within a few batches
ERROR_WINDOW = 200  # admitted requests whose wait ratios the margin is taken from
ERROR_QUANTILE = 0.99  # the margin covers this share of the recent ratios
MIN_ERRORS = 50  # before this many ratios, the margin is PRIOR_MARGIN
PRIOR_MARGIN = 1.5  # about the 95th percentile measured on base.yaml's model (see above)
MIN_SHARE = 0.25  # only waits predicted at this share of the bound or more are compared
MAX_MARGIN = 3.0  # so that requests predicted at a third of the bound are still admitted (and compared)


class BatchTimes:
    """The wall time of batches, predicted as `fixed + per_token * tokens` a batch, fitted by
    least squares to the recent batches (smoothed moments, the latest batch weighing
    TIME_WEIGHT). Batches all of one size, or a fit that makes no sense (no time per token),
    give time proportional to tokens; a fit below zero at zero tokens is lifted to zero there:
    both over-, not underestimate."""

    def __init__(self) -> None:
        self.batches = 0
        self._tokens = self._seconds = self._tokens_sq = self._tokens_seconds = 0.0

    def add(self, tokens: int, seconds: float) -> None:
        weight = max(TIME_WEIGHT, 1 / (self.batches + 1))  # the first batches: plain means
        self._tokens += weight * (tokens - self._tokens)
        self._seconds += weight * (seconds - self._seconds)
        self._tokens_sq += weight * (tokens * tokens - self._tokens_sq)
        self._tokens_seconds += weight * (tokens * seconds - self._tokens_seconds)
        self.batches += 1

    def predict(self, tokens: int, batches: int = 1) -> float | None:
        """Seconds that `batches` batches of `tokens` source tokens in all take; None before a
        batch of tokens has been timed."""
        if self._tokens <= 0:
            return None
        spread = self._tokens_sq - self._tokens**2
        per_token, fixed = self._seconds / self._tokens, 0.0  # proportional, unless a slope fits
        if spread > 0.01 * self._tokens**2:  # batches of more than about one size
            slope = (self._tokens_seconds - self._tokens * self._seconds) / spread
            if slope > 0:
                per_token, fixed = slope, max(0.0, self._seconds - slope * self._tokens)
        return batches * fixed + per_token * tokens


class WaitErrors:
    """The ratios (actual wait) / (predicted wait) of the last ERROR_WINDOW admitted requests
    whose predicted wait was at least MIN_SHARE of the bound (shorter ones say little about the
    waits near it), and the margin taken from them: their ERROR_QUANTILE-th ratio, between 1
    (a prediction is never taken as too long) and MAX_MARGIN; PRIOR_MARGIN until MIN_ERRORS
    ratios are in (a burst after a quiet spell would otherwise be admitted on a few)."""

    def __init__(self, bound_s: float) -> None:
        self.bound_s = bound_s
        self._ratios: deque[float] = deque(maxlen=ERROR_WINDOW)
        self.margin = PRIOR_MARGIN

    def add(self, predicted_s: float, actual_s: float) -> None:
        """One admitted request: the wait predicted when it was admitted, and the one it had."""
        if predicted_s < MIN_SHARE * self.bound_s:
            return
        self._ratios.append(actual_s / predicted_s)
        if len(self._ratios) >= MIN_ERRORS:
            ranked = sorted(self._ratios)
            ratio = ranked[min(len(ranked) - 1, int(ERROR_QUANTILE * len(ranked)))]
            self.margin = min(MAX_MARGIN, max(1.0, ratio))
