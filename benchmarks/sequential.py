"""The sequential test's validity and savings, by simulation (prints a table).

    python -m benchmarks.sequential [--sims 2000]

Cases arrive one at a time; each is broken with probability f/2 + d and fixed with probability
f/2 (the trinomial model of the gate's MDE). The run stops as soon as the mixture e-value
(stats.sequential_e_value) reaches 1/alpha. Under no change (d = 0) the share of runs that
ever stop (a false fail) must stay under alpha, however many times the test looks.
"""

from __future__ import annotations

import argparse

import numpy as np

from evalgate.stats import sequential_e_value, wilson_interval


def simulate(n: int, f: float, d: float, alpha: float, sims: int, seed: int) -> tuple[int, float]:
    """(runs that stopped with a fail, mean share of calls saved among them)."""
    rng = np.random.default_rng(seed)
    stopped, saved = 0, []
    for _ in range(sims):
        draws = rng.random(n)
        broken_at = draws < f / 2 + d
        fixed_at = (draws >= f / 2 + d) & (draws < f + d)
        b = c = 0
        for i in np.flatnonzero(broken_at | fixed_at):
            if broken_at[i]:
                b += 1
            else:
                c += 1
            if sequential_e_value(b, c) >= 1 / alpha:
                stopped += 1
                saved.append(1 - (i + 1) / n)
                break
    return stopped, float(np.mean(saved)) if saved else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sims", type=int, default=2000)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--flip", type=float, default=0.10)
    args = parser.parse_args()
    alpha = 0.05
    print(f"Sequential test, n = {args.n}, f = {args.flip}, alpha = {alpha}, {args.sims} runs each")
    print(f"{'true drop':>10} {'stopped (fail)':>15} {'95% CI':>16} {'calls saved':>12}  target")
    for d, target in (
        (0.0, "<= 0.05 (false fails)"),
        (0.08, "(power of early stop)"),
        (0.20, "(a clear regression)"),
    ):
        k, saved = simulate(args.n, args.flip, d, alpha, args.sims, seed=int(d * 1000) + 7)
        low, high = wilson_interval(k, args.sims)
        print(
            f"{100 * d:>8.0f}pt {k / args.sims:>15.3f} {f'{low:.3f}-{high:.3f}':>16} "
            f"{100 * saved:>11.0f}%  {target}"
        )


if __name__ == "__main__":
    main()
