# SPDX-License-Identifier: Apache-2.0
import pytest

from tuning import stats


def test_fit_recovers_non_negative_coefficients():
    xs = [[1.0, w, o] for w, o in ((0.1, 1), (0.3, 3), (1.0, 10), (3.0, 30), (1.0, 2), (3, 1))]
    truth = [0.005, 0.004, 0.001]
    c = stats.fit([(x, sum(a * b for a, b in zip(truth, x))) for x in xs])
    assert c == pytest.approx(truth, rel=1e-9)


def test_fit_keeps_coefficients_non_negative():
    # Times falling with the second term: the best non-negative fit drops it.
    samples = [([1.0, v], 1.0 - 0.1 * v) for v in (0, 1, 2, 3)]
    c = stats.fit(samples)
    assert c[1] == 0 and c[0] > 0


def test_percentile_nearest_rank():
    assert stats.percentile([5, 1, 4, 2, 3], 50) == 3
    assert stats.percentile([5, 1, 4, 2, 3], 95) == 5
    assert stats.percentile([7], 10) == 7


def test_solve_says_when_singular():
    assert stats.solve([[2.0, 0.0], [0.0, 4.0]], [2.0, 8.0]) == pytest.approx([1.0, 2.0])
    assert stats.solve([[1.0, 2.0], [2.0, 4.0]], [1.0, 2.0]) is None


def test_fit_of_nothing_is_none():
    assert stats.fit([]) is None


def test_predicted_is_the_dot_product():
    assert stats.predicted([1.0, 0.5, 0.0], [2.0, 4.0, 9.0]) == 4.0
