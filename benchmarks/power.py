"""The minimum detectable effect of the default paired test, by n, flip rate f and repeats,
and how far the power model's shortcuts move it.

    python -m benchmarks.power

The exact conditional test with R baseline and K candidate draws a case, one-sided, 80% power,
at the paired test's alpha share for a single suite (0.9 * 0.05 = 0.045). R = K = 1 is the
sign test, computed exactly; f = 0 is exact too (binomial); the rest is
analysis.conditional.conditional_power (its model: a share 2f of cases noisy at pass rate 1/2,
a share d broken, the rest settled; the broken count summed exactly, the noisy one summed
while its mean is under SUMMED_NOISY_CASES), checked against simulated pull requests in
benchmarks/gate_simulation.

The second table sets the model's power beside two others over a grid of n, f, repeats and
drops: the full sum over the noisy count too (what the shortcut leaves out), and the closed
form that takes both counts at their means (what the model replaced), each its largest
difference in points.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import evalgate.analysis.conditional as conditional
from evalgate.analysis.conditional import LATTICE_CORRECTION, conditional_mde, conditional_power

ALPHA = 0.9 * 0.05
DRAWS = ((1, 1), (2, 1), (3, 1), (5, 1), (2, 2))
# The grid of the second table (R = K = 1 and f = 0 are exact and left out).
SIZES = (40, 100, 300, 400, 1000, 3000)
FLIPS = (0.005, 0.01, 0.02, 0.05, 0.09, 0.15, 0.3)
REPEATS = ((2, 1), (3, 1), (2, 2), (5, 1))
DROPS = (0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.15)


def closed_form(n: int, f: float, d: float, alpha: float, r: int, k: int) -> float:
    """Both counts at their means: Phi((n |m| - z sqrt(n v0) - 1/2) / sqrt(n v1)), per case
    mean m = -d K R / N, null variance v0 = u K R / (4 N) + d K^2 R^2 / (N^2 (N - 1)) and
    variance v1 = u K R / (4 N) + d (K R / N)^2 - m^2 (u = 2f, N = R + K)."""
    u, big_n = min(1.0, 2.0 * f), r + k
    d = min(d, 1.0 - u)
    m = -d * k * r / big_n
    v0 = u * k * r / (4 * big_n) + d * (k * r) ** 2 / (big_n**2 * (big_n - 1))
    v1 = u * k * r / (4 * big_n) + d * (k * r / big_n) ** 2 - m * m
    z = NormalDist().inv_cdf(1.0 - alpha)
    shift = n * abs(m) - z * math.sqrt(n * v0) - LATTICE_CORRECTION
    return NormalDist().cdf(shift / math.sqrt(n * v1))


def full_sum(n: int, f: float, d: float, alpha: float, r: int, k: int) -> float:
    """The model's power with the noisy count summed at every size."""
    kept = conditional.SUMMED_NOISY_CASES
    conditional.SUMMED_NOISY_CASES = math.inf
    try:
        return conditional_power(n, f, d, alpha, r, k)
    finally:
        conditional.SUMMED_NOISY_CASES = kept


def main() -> None:
    print(f"MDE in points (one-sided alpha {ALPHA:g}, power 0.8)")
    head = f"| {'n':>5} | {'f':>4} | " + " | ".join(f"R={r}, K={k}" for r, k in DRAWS) + " |"
    print(head)
    print("|" + "|".join("---:" for _ in range(2 + len(DRAWS))) + "|")
    for n in (40, 100, 300, 1000):
        for f in (0.0, 0.05, 0.09):
            cells = [100 * conditional_mde(n, f, ALPHA, 0.8, r, k) for r, k in DRAWS]
            print(f"| {n:>5} | {f:>4} | " + " | ".join(f"{c:>8.1f}" for c in cells) + " |")
    print(
        f"\nPower at alpha {ALPHA:g}, the largest difference from the model's over f in "
        f"{', '.join(f'{f:g}' for f in FLIPS)}, (R, K) in {REPEATS} and drops "
        f"{', '.join(f'{d:g}' for d in DROPS)}, in points (and where):"
    )
    print("| n | full sum over the noisy count | closed form (both counts at their means) |")
    print("|---:|---:|---:|")
    for n in SIZES:
        worst = {"full": (0.0, ""), "closed": (0.0, "")}
        for f in FLIPS:
            for r, k in REPEATS:
                for d in DROPS:
                    model = conditional_power(n, f, d, ALPHA, r, k)
                    where = f"f={f:g}, R={r}, K={k}, d={d:g}"
                    for name, other in (
                        ("full", full_sum(n, f, d, ALPHA, r, k)),
                        ("closed", closed_form(n, f, d, ALPHA, r, k)),
                    ):
                        gap = 100 * abs(other - model)
                        if gap > worst[name][0]:
                            worst[name] = (gap, where)
        print(
            f"| {n} | {worst['full'][0]:.2f} ({worst['full'][1]}) "
            f"| {worst['closed'][0]:.2f} ({worst['closed'][1]}) |"
        )
    print_diffuse_ceiling()


#: The fixed designs' measured power at a 4.7-point diffuse drop (docs/statistics.md, "The
#: two-stage design": benchmarks.gate_simulation --adaptive --diffuse --sims 2000).
DIFFUSE_K2_POWER = 0.921
DIFFUSE_BASELINE_DRAWS = 2


def diffuse_ceiling(k2_power: float, share: float, alpha: float, r: int = 2) -> float:
    """The most power a design spending ``share`` of two candidate repeats' calls can have under
    a diffuse drop, in the normal approximation: the paired contrast's variance is at least
    ``n (1/R + 1/K)`` at the budget's even spread ``K = 2 share`` (1/K is convex), and K = 2's
    power fixes the effect's size ``c = z_power + z_alpha`` at variance ``n (1/R + 1/2)``."""
    z = NormalDist().inv_cdf
    c = (z(k2_power) + z(1.0 - alpha)) * math.sqrt(1.0 / r + 1.0 / 2.0)
    k = 2.0 * share
    return NormalDist().cdf(c / math.sqrt(1.0 / r + 1.0 / k) - z(1.0 - alpha))


def print_diffuse_ceiling() -> None:
    print(
        "\nUnder a diffuse drop, the most power of a design spending a share of K = 2's calls "
        f"(R = {DIFFUSE_BASELINE_DRAWS}, K = 2 measured at {100 * DIFFUSE_K2_POWER:.1f}%):"
    )
    print("| share of K = 2's calls | ceiling |")
    print("|---:|---:|")
    for share in (0.5, 0.6, 1.0):
        ceiling = diffuse_ceiling(DIFFUSE_K2_POWER, share, ALPHA, DIFFUSE_BASELINE_DRAWS)
        print(f"| {100 * share:.0f}% | {100 * ceiling:.1f}% |")


if __name__ == "__main__":
    main()
