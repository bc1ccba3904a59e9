"""The report's order statistics: an even count's median is the mean of its middle values, a
quantile interpolates between order statistics, and a tail of fewer than 100 values is named as
the maximum it is."""

from __future__ import annotations

import statistics

import pytest

from bench.common import stats


def test_the_median_of_an_even_count_is_between_the_middle_values() -> None:
    assert stats.median([0.84, 1.0, 0.7, 0.92]) == pytest.approx(0.88)


def test_quantiles_interpolate_like_the_standard_library() -> None:
    values = [float(v) for v in (7, 1, 3, 9, 4, 12, 2)]
    cuts = statistics.quantiles(values, n=4, method="inclusive")
    assert [stats.quantile(values, q) for q in (0.25, 0.5, 0.75)] == pytest.approx(cuts)
    assert (stats.quantile(values, 0.0), stats.quantile(values, 1.0)) == (1.0, 12.0)
    with pytest.raises(ValueError, match="within"):
        stats.quantile(values, 1.5)


def test_a_tail_is_a_p99_only_from_enough_samples() -> None:
    ten = [float(v) for v in range(10)]
    assert stats.tail(ten) == stats.Tail(9.0, "max of 10")
    hundred = [float(v) for v in range(stats.TAIL_SAMPLES)]
    p99 = stats.tail(hundred)
    assert p99.label == "p99"
    assert p99.value == pytest.approx(98.01)
