"""The sequential test's validity and savings, by simulation (prints a table).

    python -m benchmarks.sequential [--sims 2000]

Cases arrive one at a time in file order; each is broken with probability f/2 + d and fixed
with probability f/2 (the trinomial of the gate's MDE). The paired test's alpha share
(alpha * 0.9 beside format validity) is split in two: the run stops as soon as the mixture
e-value (stats.sequential_e_value) reaches 2 / (alpha * 0.9); a run that never stops is judged
at the end by the sign test at alpha * 0.9 / 2. Under no change (d = 0) the share of runs that
fail either way must stay under alpha, however many times the test looks and however long the
suite.
"""

from __future__ import annotations

import argparse

import numpy as np

from evalgate.analysis.intervals import wilson_interval
from evalgate.analysis.sequential import sequential_e_value
from evalgate.analysis.sign_test import sign_test_worse
from evalgate.config.models import GatePolicy
from evalgate.gate.sequential import sequential_threshold

SHARE = 0.9  # the paired test's share of alpha beside the format-validity route


def simulate(
    n: int, f: float, d: float, alpha: float, sims: int, seed: int
) -> tuple[int, int, float]:
    """(runs stopped early, runs failed by stop or final test, mean share of calls saved)."""
    rng = np.random.default_rng(seed)
    threshold = sequential_threshold(GatePolicy(alpha=alpha), 1)
    stopped = failed = 0
    saved = []
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
            if sequential_e_value(b, c) >= threshold:
                stopped += 1
                saved.append(1 - (i + 1) / n)
                break
        else:
            failed += sign_test_worse(b, c) <= alpha * SHARE / 2
            continue
        failed += 1
    return stopped, failed, float(np.mean(saved)) if saved else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sims", type=int, default=2000)
    parser.add_argument("--flip", type=float, default=0.10)
    args = parser.parse_args()
    alpha = 0.05
    print(
        f"Sequential test, f = {args.flip}, alpha = {alpha} (paired share {SHARE}), "
        f"{args.sims} runs each; stop at E >= {2 / (alpha * SHARE):.1f}"
    )
    print(
        f"{'n':>6} {'true drop':>10} {'stopped':>9} {'failed (any)':>13} {'95% CI':>13} "
        f"{'calls saved':>12}  target"
    )
    for n in (300, 1000, 3000):
        for d, target in ((0.0, "<= 0.05 (false fails)"), (0.08, "(power)")):
            stop, fail, saved = simulate(n, args.flip, d, alpha, args.sims, seed=n + int(d * 1000))
            low, high = wilson_interval(fail, args.sims)
            print(
                f"{n:>6} {100 * d:>8.0f}pt {stop / args.sims:>9.3f} {fail / args.sims:>13.3f} "
                f"{f'{low:.3f}-{high:.3f}':>13} {100 * saved:>11.0f}%  {target}"
            )


if __name__ == "__main__":
    main()
