"""The minimum detectable effect of the default paired test, by n, flip rate f and repeats.

    python -m benchmarks.power

The exact conditional test with R baseline and K candidate draws a case, one-sided, 80% power,
at the paired test's alpha share for a single suite (0.9 * 0.05 = 0.045). R = K = 1 is the
sign test, computed exactly; f = 0 is exact too (binomial); the rest is the normal
approximation of stats.conditional_power (its model: a share 2f of cases noisy at pass rate
1/2, the rest settled), checked against simulated pull requests in benchmarks/gate_simulation.
"""

from __future__ import annotations

from evalgate.analysis.conditional import conditional_mde

ALPHA = 0.9 * 0.05
DRAWS = ((1, 1), (2, 1), (3, 1), (5, 1), (2, 2))


def main() -> None:
    print(f"MDE in points (one-sided alpha {ALPHA:g}, power 0.8)")
    head = f"| {'n':>5} | {'f':>4} | " + " | ".join(f"R={r}, K={k}" for r, k in DRAWS) + " |"
    print(head)
    print("|" + "|".join("---:" for _ in range(2 + len(DRAWS))) + "|")
    for n in (40, 100, 300, 1000):
        for f in (0.0, 0.05, 0.09):
            cells = [100 * conditional_mde(n, f, ALPHA, 0.8, r, k) for r, k in DRAWS]
            print(f"| {n:>5} | {f:>4} | " + " | ".join(f"{c:>8.1f}" for c in cells) + " |")


if __name__ == "__main__":
    main()
