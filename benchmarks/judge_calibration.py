"""How often the judge-calibration intervals cover the truth, and how often the floor is fooled.

    python -m benchmarks.judge_calibration              # about a minute on 2 cores
    python -m benchmarks.judge_calibration --trials 500

A simulated judge grades labelled replies: each reply is a human pass with probability
``prevalence``; the judge passes a human pass with probability Se and a human fail with
probability 1 - Sp. For each setting, many label sets of n items are drawn and
evalgate.analysis.calibration computes kappa's 95% interval (analytic, Fleiss-Cohen-Everitt) and the
Rogan-Gladen corrected pass rate of a 300-case run with its delta-method interval.

The truth: the population kappa of the judge (from the cell probabilities) and the run's true
pass rate. Columns: the share of intervals that cover the truth (95% is the target), and for
the floor (judge.min_kappa = 0.6 on the interval's low end) the share of label sets on which a
judge whose true kappa is under 0.6 would be let gate.
"""

from __future__ import annotations

import argparse

import numpy as np

from evalgate.analysis.calibration import Table, cohen_kappa, rogan_gladen

SETTINGS = [
    # (n labels, prevalence of human pass, Se, Sp)
    (30, 0.5, 0.9, 0.9),
    (50, 0.5, 0.9, 0.9),
    (100, 0.5, 0.9, 0.9),
    (50, 0.8, 0.95, 0.8),
    (100, 0.8, 0.95, 0.8),
    (200, 0.8, 0.95, 0.8),
    (50, 0.5, 0.8, 0.75),  # true kappa 0.55: under the floor
    (100, 0.5, 0.8, 0.75),
]
RUN_CASES = 300


def true_kappa(prevalence: float, se: float, sp: float) -> float:
    a = prevalence * se
    b = (1 - prevalence) * (1 - sp)
    d = (1 - prevalence) * sp
    po = a + d
    judge = a + b
    pe = judge * prevalence + (1 - judge) * (1 - prevalence)
    return (po - pe) / (1 - pe)


def simulate(
    n: int, prevalence: float, se: float, sp: float, trials: int, rng: np.random.Generator
) -> dict[str, float]:
    kappa = true_kappa(prevalence, se, sp)
    # The run's cases: the true pass rate is `prevalence`; the judge's raw pass share is noisy.
    covered = fooled = rg_covered = rg_n = undefined = 0
    for _ in range(trials):
        human = rng.random(n) < prevalence
        judge = np.where(human, rng.random(n) < se, rng.random(n) < 1 - sp)
        table = Table.of(list(zip(judge.tolist(), human.tolist(), strict=True)))
        k = cohen_kappa(table)
        if k is None:
            undefined += 1
            continue
        covered += k.low <= kappa <= k.high
        fooled += kappa < 0.6 <= k.low
        truth = rng.random(RUN_CASES) < prevalence
        graded = np.where(truth, rng.random(RUN_CASES) < se, rng.random(RUN_CASES) < 1 - sp)
        corrected = rogan_gladen(int(graded.sum()), RUN_CASES, table)
        if corrected is not None:
            rg_n += 1
            rg_covered += corrected.low <= prevalence <= corrected.high
    defined = trials - undefined
    return {
        "kappa": kappa,
        "coverage": covered / defined if defined else float("nan"),
        "fooled": fooled / defined if defined else float("nan"),
        "rg_coverage": rg_covered / rg_n if rg_n else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=19)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"{args.trials} label sets per row; run of {RUN_CASES} cases for Rogan-Gladen")
    print(
        f"{'n':>5} {'prev':>5} {'Se':>5} {'Sp':>5} {'kappa':>6} "
        f"{'kappa CI covers':>16} {'floor fooled':>13} {'RG CI covers':>13}"
    )
    for n, prevalence, se, sp in SETTINGS:
        row = simulate(n, prevalence, se, sp, args.trials, rng)
        fooled = f"{100 * row['fooled']:.1f}%" if row["kappa"] < 0.6 else "-"
        print(
            f"{n:>5} {prevalence:>5.2f} {se:>5.2f} {sp:>5.2f} {row['kappa']:>6.3f} "
            f"{100 * row['coverage']:>15.1f}% {fooled:>13} {100 * row['rg_coverage']:>12.1f}%"
        )


if __name__ == "__main__":
    main()
