"""The sequential test: a mixture e-value on the broken and fixed counts so far, which a run
may look at after every case and still stop at level alpha."""

from __future__ import annotations

import math

from evalgate.analysis.checks import check_count


def sequential_e_value(broken: int, fixed: int) -> float:
    """Mixture e-value against "the candidate is no worse", on the broken / fixed counts so far.

    Under H0 each changed case is broken with probability 1/2. The e-value mixes the likelihood
    ratio of "broken with probability theta" over theta ~ Uniform(1/2, 1)::

        E = 2 * integral_{1/2}^{1} theta^b (1 - theta)^c d theta / (1/2)^(b + c)
          = 2^(b + c + 1) * B(b + 1, c + 1) * P(Beta(b + 1, c + 1) > 1/2)

    A mixture of likelihood ratios is a nonnegative martingale under H0 with expectation 1, so
    by Ville's inequality P(E ever reaches 1/alpha) <= alpha, however often it is looked at
    (Ramdas et al. 2023, "Game-theoretic statistics and safe anytime-valid inference", sec. 3).
    A run may therefore stop as soon as E >= 1/alpha and still fail at level alpha.

    The Beta tail is ``P(Bin(b + c + 1, 1/2) <= b) = sum_{j<=b} C(b + c + 1, j) / 2^(b + c + 1)``,
    so ``E = B(b + 1, c + 1) * sum_{j<=b} C(b + c + 1, j)``, summed in logs: the tail itself
    underflows past about a thousand changed cases (and a floor on it would turn many fixed
    cases into a huge e-value). Values beyond e^700 are capped there.
    """
    check_count("broken", broken)
    check_count("fixed", fixed)
    n = broken + fixed + 1
    log_binomials = [
        math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n + 1 - j) for j in range(broken + 1)
    ]
    top = max(log_binomials)
    log_sum = top + math.log(math.fsum(math.exp(v - top) for v in log_binomials))
    log_beta = math.lgamma(broken + 1) + math.lgamma(fixed + 1) - math.lgamma(broken + fixed + 2)
    log_e = log_beta + log_sum
    return math.exp(min(log_e, 700.0))
