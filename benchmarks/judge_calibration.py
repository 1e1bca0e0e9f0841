"""How often the judge-calibration intervals cover the truth, and how often the floor is fooled.

    python -m benchmarks.judge_calibration              # a few minutes on 2 cores
    python -m benchmarks.judge_calibration --trials 500 --boot-trials 200

A simulated judge grades labelled replies: each reply is a human pass with probability
``prevalence``; the judge passes a human pass with probability Se and a human fail with
probability 1 - Sp. For each setting, many label sets of n items are drawn and
evalgate.analysis.calibration computes kappa's 95% interval (analytic, Fleiss-Cohen-Everitt;
and the seeded bootstrap, percentile and BCa, over the items) and the Rogan-Gladen corrected
pass rate of a 300-case run with its delta-method interval. The grouped rows draw labels in
groups of three phrasings of one reply, which share the human verdict and the judge's: the
analytic interval and an item bootstrap treat them as independent, the group bootstrap does not.

The truth: the population kappa of the judge (from the cell probabilities) and the run's true
pass rate. Columns: the share of intervals that cover the truth (95% is the target), and for
the floor (judge.min_kappa = 0.6 on the interval's low end) the share of label sets on which a
judge whose true kappa is under 0.6 would be let gate.
"""

from __future__ import annotations

import argparse

import numpy as np

from evalgate.analysis.calibration import Table, bootstrap_kappa, cohen_kappa, rogan_gladen

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
# (n labels in groups of GROUP phrasings that share both verdicts, prevalence, Se, Sp)
GROUPED = [(60, 0.5, 0.9, 0.9), (150, 0.5, 0.9, 0.9), (150, 0.8, 0.95, 0.8)]
GROUP = 3
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
    n: int,
    prevalence: float,
    se: float,
    sp: float,
    trials: int,
    rng: np.random.Generator,
    *,
    boot_trials: int,
    group: int = 1,
) -> dict[str, float]:
    kappa = true_kappa(prevalence, se, sp)
    # The run's cases: the true pass rate is `prevalence`; the judge's raw pass share is noisy.
    covered = fooled = rg_covered = rg_n = undefined = 0
    boot = {"percentile": [0, 0, 0], "bca": [0, 0, 0], "items": [0, 0, 0]}  # covered, fooled, n
    for trial in range(trials):
        units = n // group
        human = np.repeat(rng.random(units) < prevalence, group)
        judge = np.repeat(
            np.where(human[::group], rng.random(units) < se, rng.random(units) < 1 - sp), group
        )
        pairs = list(zip(judge.tolist(), human.tolist(), strict=True))
        groups = [str(i // group) for i in range(len(pairs))]
        table = Table.of(pairs)
        k = cohen_kappa(table)
        if k is None:
            undefined += 1
            continue
        covered += k.low <= kappa <= k.high
        fooled += kappa < 0.6 <= k.low
        if trial < boot_trials:
            for method in ("percentile", "bca") if group == 1 else ("percentile", "bca", "items"):
                b = bootstrap_kappa(
                    pairs,
                    None if method == "items" else groups,
                    seed=trial,
                    method="bca" if method == "items" else method,  # type: ignore[arg-type]
                )
                assert b is not None
                boot[method][0] += b.low <= kappa <= b.high
                boot[method][1] += kappa < 0.6 <= b.low
                boot[method][2] += 1
        truth = rng.random(RUN_CASES) < prevalence
        graded = np.where(truth, rng.random(RUN_CASES) < se, rng.random(RUN_CASES) < 1 - sp)
        corrected = rogan_gladen(int(graded.sum()), RUN_CASES, table)
        if corrected is not None:
            rg_n += 1
            rg_covered += corrected.low <= prevalence <= corrected.high
    defined = trials - undefined

    def share(x: int, m: int) -> float:
        return x / m if m else float("nan")

    return {
        "kappa": kappa,
        "coverage": share(covered, defined),
        "fooled": share(fooled, defined),
        "rg_coverage": share(rg_covered, rg_n),
        **{f"{m}_coverage": share(c, t) for m, (c, _, t) in boot.items()},
        **{f"{m}_fooled": share(f, t) for m, (_, f, t) in boot.items()},
        "boot_n": max(t for _, _, t in boot.values()),
    }


def _pct(x: float) -> str:
    return "-" if x != x else f"{100 * x:.1f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument(
        "--boot-trials", type=int, default=1000, help="label sets per row that are bootstrapped"
    )
    parser.add_argument("--seed", type=int, default=19)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(
        f"{args.trials} label sets per row ({args.boot_trials} of them bootstrapped, "
        f"2000 resamples each); run of {RUN_CASES} cases for Rogan-Gladen"
    )
    print("Coverage of kappa's 95% interval (target 95%); floor fooled: a judge whose true kappa")
    print("is under 0.6 clears judge.min_kappa = 0.6")
    print(
        f"{'n':>5} {'group':>5} {'prev':>5} {'Se':>5} {'Sp':>5} {'kappa':>6} "
        f"{'analytic':>9} {'boot pct':>9} {'boot BCa':>9} {'boot items':>11} "
        f"{'fooled: analytic':>17} {'boot pct':>9} {'boot BCa':>9} {'RG CI covers':>13}"
    )
    rows = [(s, 1) for s in SETTINGS] + [(s, GROUP) for s in GROUPED]
    for (n, prevalence, se, sp), group in rows:
        row = simulate(
            n, prevalence, se, sp, args.trials, rng, boot_trials=args.boot_trials, group=group
        )
        under = row["kappa"] < 0.6
        print(
            f"{n:>5} {group:>5} {prevalence:>5.2f} {se:>5.2f} {sp:>5.2f} {row['kappa']:>6.3f} "
            f"{_pct(row['coverage']):>9} {_pct(row['percentile_coverage']):>9} "
            f"{_pct(row['bca_coverage']):>9} {_pct(row['items_coverage']):>11} "
            f"{_pct(row['fooled']) if under else '-':>17} "
            f"{_pct(row['percentile_fooled']) if under else '-':>9} "
            f"{_pct(row['bca_fooled']) if under else '-':>9} "
            f"{_pct(row['rg_coverage']):>13}"
        )
    print("boot items: on grouped labels, a BCa bootstrap that resamples single labels, not groups")


if __name__ == "__main__":
    main()
