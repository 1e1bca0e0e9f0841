"""How often a true drop equal to the tolerance passes, by exact enumeration (prints a table).

    python -m benchmarks.margin_size                      # margin 5 points, alpha 0.05 (~2 min)
    python -m benchmarks.margin_size --margin 0.02 --alpha 0.01

One draw a side (R = K = 1): each of n cases is broken (probability p10), fixed (p01) or the
same, so the counts (b, c) are trinomial, and at the margin p10 = p01 + margin. The gate passes
when Tango's bound is under the margin, i.e. when Z(margin) <= -z_{1-alpha}. For each n the
pass region is enumerated over every (b, c) with b + c <= n; for m = b + c cases changed it is
the set b <= t(m) (checked), so

    P(pass) = sum_m P(Bin(n, p10 + p01) = m) P(Bin(m, p10 / (p10 + p01)) <= t(m)),

and the size is its largest value over the nuisance p01 in [0, (1 - margin) / 2] (a grid of
401 values with both ends; the largest is nearly always at the upper end, where every case
changes). Columns: the size with Tango's statistic as published (correction 0) and with the
gate's continuity correction (stats.TANGO_CORRECTION), each for the listed n, then the worst
over every n from 10 to 600. The vectorised Z below is stats.tango_z's formula; a check at the
start compares its pass region with stats.tango_upper_drop's at n = 30.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from scipy.special import bdtr
from scipy.stats import binom, norm

from evalgate.analysis.margin import TANGO_CORRECTION, tango_upper_drop

SHOWN = (10, 15, 20, 25, 30, 40, 50, 60, 65, 80, 100, 150, 200, 300, 400, 500, 600)
EVERY = range(10, 601)


def thresholds(n: int, margin: float, alpha: float, correction: float) -> np.ndarray:
    """t(m): the largest b of m = b + c changed cases that passes (-1: none)."""
    z = float(norm.ppf(1.0 - alpha))
    b = np.arange(n + 1, dtype=float)[:, None]
    c = np.arange(n + 1, dtype=float)[None, :]
    quad = -b - c + (2.0 * n - b + c) * margin
    p01 = -quad + np.sqrt(np.maximum(0.0, quad * quad + 8.0 * n * c * margin * (1 - margin)))
    p01 = p01 / (4.0 * n)
    var = n * (2.0 * p01 + margin * (1.0 - margin))
    passes = (b - c - n * margin + correction) / np.sqrt(var) <= -z
    valid = (b + c) <= n
    passes &= valid
    bi, ci = np.indices(passes.shape)
    m = bi + ci
    counts = np.bincount(m[valid], weights=passes[valid], minlength=2 * n + 1)[: n + 1]
    t = counts.astype(int) - 1
    if not np.array_equal(passes[valid], bi[valid] <= t[m[valid]]):
        raise AssertionError(f"the pass region at n = {n} is not b <= t(m)")
    return t


def size(n: int, margin: float, alpha: float, correction: float) -> tuple[float, float]:
    """The largest pass probability over the nuisance p01, and the p01 where it is."""
    t = thresholds(n, margin, alpha, correction)
    p01 = np.linspace(0.0, (1.0 - margin) / 2.0, 401)[:, None]
    p10 = p01 + margin
    m = np.arange(n + 1)[None, :]
    changed = binom.pmf(m, n, p10 + p01)
    kept = np.where(t[None, :] >= 0, bdtr(np.maximum(t, 0)[None, :], m, p10 / (p10 + p01)), 0.0)
    sizes = (changed * kept).sum(axis=1)
    i = int(np.argmax(sizes))
    return float(sizes[i]), float(p01[i, 0])


def check_against_the_gate(margin: float, alpha: float, n: int = 30) -> None:
    t = thresholds(n, margin, alpha, TANGO_CORRECTION)
    for m in range(n + 1):
        got = [b for b in range(m + 1) if tango_upper_drop(b, m - b, n, alpha) < margin]
        if got != list(range(t[m] + 1)):
            raise AssertionError(f"n = {n}, m = {m}: the gate passes b in {got}, not b <= {t[m]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--margin", type=float, default=0.05, help="tolerance (default 0.05)")
    parser.add_argument("--alpha", type=float, default=0.05, help="alpha (default 0.05)")
    args = parser.parse_args(argv)
    check_against_the_gate(args.margin, args.alpha)
    print(
        f"Pass rate at a true drop of {100 * args.margin:g} points (exact, R = K = 1, "
        f"largest over the nuisance), alpha {args.alpha:g}"
    )
    print(
        f"| n | Tango | corrected ({TANGO_CORRECTION:g}) | p01 where the corrected size is largest |"
    )
    print("|---:|---:|---:|---:|")
    worst = {0.0: (0.0, 0), TANGO_CORRECTION: (0.0, 0)}
    for n in EVERY:
        row = {}
        for g in worst:
            value, at = size(n, args.margin, args.alpha, g)
            row[g] = (value, at)
            if value > worst[g][0]:
                worst[g] = (value, n)
        if n in SHOWN:
            before, after = row[0.0][0], row[TANGO_CORRECTION]
            print(f"| {n} | {100 * before:.2f}% | {100 * after[0]:.2f}% | {after[1]:.3f} |")
    (b, nb), (a, na) = worst[0.0], worst[TANGO_CORRECTION]
    print(f"| worst, n = 10-600 | {100 * b:.2f}% (n = {nb}) | {100 * a:.2f}% (n = {na}) | |")
    return 0 if a <= args.alpha else 1


if __name__ == "__main__":
    sys.exit(main())
