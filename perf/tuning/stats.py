# SPDX-License-Identifier: Apache-2.0
"""The statistics the tuning tools share: nearest-rank percentiles and the non-negative
least-squares fit of a cost model's coefficients. Standard library only; imports nothing of the
package, so that the models, tuning.judge and tuning.rules all build on it."""
import itertools
import math


def percentile(values, q):
    """Nearest-rank percentile of a non-empty list."""
    s = sorted(values)
    return s[max(0, min(len(s) - 1, math.ceil(q / 100.0 * len(s)) - 1))]


def solve(a, b):
    """Gaussian elimination with partial pivoting; None when singular."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        pivot = max(range(c, n), key=lambda r: abs(m[r][c]))
        if abs(m[pivot][c]) < 1e-300:
            return None
        m[c], m[pivot] = m[pivot], m[c]
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit(samples):
    """Non-negative c minimising sum ((c . x) / t - 1)^2 over (x, t): every subset of the
    coefficients solved by least squares (columns scaled), the best feasible one kept."""
    if not samples:
        return None
    k = len(samples[0][0])
    scale = [max(abs(x[j]) / t for x, t in samples) or 1.0 for j in range(k)]
    rows = [[x[j] / t / scale[j] for j in range(k)] for x, t in samples]
    best, best_err = None, math.inf
    for size in range(1, k + 1):
        for subset in itertools.combinations(range(k), size):
            a = [[sum(r[i] * r[j] for r in rows) for j in subset] for i in subset]
            b = [sum(r[i] for r in rows) for i in subset]
            sol = solve(a, b)
            if sol is None or min(sol) < 0:
                continue
            c = [0.0] * k
            for i, v in zip(subset, sol):
                c[i] = v / scale[i]
            err = sum((sum(cj * xj for cj, xj in zip(c, x)) / t - 1) ** 2 for x, t in samples)
            if err < best_err:
                best, best_err = c, err
    return best


def predicted(c, x):
    """A linear cost model's prediction: coefficients c times terms x."""
    return sum(a * b for a, b in zip(c, x))
