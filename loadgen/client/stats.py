"""Percentiles: exact ones over a list, and a small log-bucketed histogram for streams of values."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

__all__ = ["LogHistogram", "format_ms", "percentile", "summary"]

_log = math.log


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) of ascending values, interpolated linearly (numpy's default)."""
    n = len(sorted_values)
    if n == 0:
        return None
    pos = (n - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summary(values: Iterable[float]) -> dict[str, float | int | None]:
    """``count``, ``mean``, ``p50``, ``p90``, ``p95``, ``p99`` and ``max`` of ``values`` (None when empty)."""
    ordered = sorted(values)
    n = len(ordered)
    return {
        "count": n,
        "mean": sum(ordered) / n if n else None,
        "p50": percentile(ordered, 50),
        "p90": percentile(ordered, 90),
        "p95": percentile(ordered, 95),
        "p99": percentile(ordered, 99),
        "max": ordered[-1] if n else None,
    }


class LogHistogram:
    """Counts of non-negative values in log-spaced buckets: O(1) to add, quantiles within ``precision``.

    Values below ``floor`` (seconds; default 1 µs) share one bucket and read back as 0.
    """

    __slots__ = ("_counts", "_factor", "_floor", "_inv_log_base", "count", "max", "total")

    def __init__(self, precision: float = 0.01, floor: float = 1e-6) -> None:
        self._factor = 1 + 2 * precision
        self._inv_log_base = 1 / math.log(self._factor)
        self._floor = floor
        self._counts: dict[int, int] = {}
        self.count = 0
        self.total = 0.0
        self.max = 0.0

    def add(self, value: float) -> None:
        index = -1 if value < self._floor else int(_log(value / self._floor) * self._inv_log_base)
        counts = self._counts
        counts[index] = counts.get(index, 0) + 1
        self.count += 1
        self.total += value
        if value > self.max:
            self.max = value

    def merge(self, other: LogHistogram) -> None:
        """Add ``other``'s counts (built with the same precision and floor)."""
        for index, n in other._counts.items():
            self._counts[index] = self._counts.get(index, 0) + n
        self.count += other.count
        self.total += other.total
        self.max = max(self.max, other.max)

    def quantile(self, q: float) -> float | None:
        """The value at quantile ``q`` (0..1): the midpoint of its bucket, or None when empty."""
        if self.count == 0:
            return None
        rank = q * (self.count - 1)
        seen = 0
        for index in sorted(self._counts):
            seen += self._counts[index]
            if seen > rank:
                if index < 0:
                    return 0.0
                low = self._floor * self._factor**index
                return min(low * (1 + self._factor) / 2, self.max)
        return self.max

    def summary(self) -> dict[str, float | int | None]:
        """The same keys as ``summary``."""
        return {
            "count": self.count,
            "mean": self.total / self.count if self.count else None,
            "p50": self.quantile(0.50),
            "p90": self.quantile(0.90),
            "p95": self.quantile(0.95),
            "p99": self.quantile(0.99),
            "max": self.max if self.count else None,
        }


def format_ms(seconds: float | None) -> str:
    """Seconds as milliseconds with one decimal, for the tables loadgen prints; "-" when unknown."""
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"
