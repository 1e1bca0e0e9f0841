"""What a run will cost before any call is made: its calls, input and output tokens, and price.

Calls are exact: the jobs the run would send (cases x repeats, after splits, shard and limit;
under ``gate.repeats: adaptive``, each case's allocated repeats).
Input tokens come from the rendered requests, counted by the backend where it can count them
for free (Anthropic's ``count_tokens``), else approximated at four characters a token. Output
tokens come from a baseline's measured replies (each case's own mean, the baseline's mean for a
case it lacks), else ``max_tokens`` (an upper bound). A model missing from the price table has
an unknown cost, never $0. Nothing is cached in an estimate: a cached reply costs nothing, so
the estimate is what the run costs with every call made.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from evalgate.analysis.pricing import Usage, cost, price_for
from evalgate.backends.base import Message, Request
from evalgate.backends.fake import rough_tokens
from evalgate.errors import BackendError
from evalgate.running.suite import RunSpec, build_jobs, cases_to_run, tools_sha
from evalgate.runs.schema import Run

APPROXIMATE = "approximated at four characters a token"
COUNTED = "counted by the provider's token-counting endpoint"

Counter = Callable[[Request], int]


class Estimate(BaseModel):
    """One suite's expected spend; ``usd`` None when the model has no price."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    suite: str
    model: str
    calls: int
    input_tokens: int
    output_tokens: int
    usd: float | None
    # How the input tokens were had, and where the output tokens come from.
    input_method: str
    output_method: str
    # For an offline backend (which costs nothing): the same tokens on a named real model.
    priced_as: str | None = None
    priced_as_usd: float | None = None
    notes: list[str] = []


def _count_all(requests: Sequence[Request], counter: Counter, workers: int) -> list[int]:
    """Input tokens of each request (a few counted at once); raises BackendError on a failure."""
    with ThreadPoolExecutor(max_workers=max(1, min(workers, 8))) as pool:
        return list(pool.map(counter, requests))


def _system_tokens(system: str, model: str, counter: Counter) -> int:
    """The system prompt's share of every request: a request with it less one without."""
    turn = (Message(role="user", content="."),)
    try:
        with_it = counter(Request(system=system, messages=turn, model=model))
        without = counter(Request(system="", messages=turn, model=model))
    except BackendError:
        return 0
    return max(0, with_it - without)


def _approximate(request: Request) -> int:
    return rough_tokens(request.system + "".join(m.content for m in request.messages))


def _output_per_case(baseline: Run | None) -> tuple[dict[str, float], float | None]:
    """Each baseline case's mean output tokens over its answered calls, and the overall mean."""
    if baseline is None:
        return {}, None
    per: dict[str, float] = {}
    every: list[int] = []
    for case in baseline.cases:
        tokens = [o.output_tokens for o in case.outcomes if o.error is None]
        if tokens:
            per[case.id] = sum(tokens) / len(tokens)
            every += tokens
    return per, (sum(every) / len(every) if every else None)


def estimate_run(
    spec: RunSpec,
    base_dir: Path,
    *,
    counter: Counter | None,
    baseline: Run | None,
    offline: bool,
    batch: bool = False,
    price_as: str | None = None,
    caches_system: bool = False,
) -> Estimate:
    """The spend of running ``spec``, without calling a model (``counter`` only counts).

    ``caches_system``: the backend marks the system prompt for prompt caching; when the price
    table says the model caches a prefix that long, the first call writes it and every later
    call reads it (a run longer than the cache's five minutes writes it again: more cost).
    """
    suite = spec.suite
    cases = cases_to_run(spec)
    jobs = build_jobs(
        suite,
        spec.prompt,
        cases,
        spec.repeats,
        spec.holdout_key,
        tools_sha(suite, base_dir),
        spec.template_at,
    )
    # Repeats share their case's request: count each case once, times the calls it makes
    # (every repeat, or the repeats the adaptive design gave it).
    requests = [jobs.request(i) for i in range(0, len(jobs), spec.repeats)]
    if spec.only is None:
        sends = [spec.repeats] * len(cases)
    else:
        sends = [sum((c.id, r) in spec.only for r in range(spec.repeats)) for c in cases]
    calls = sum(sends)
    notes: list[str] = []
    counted: list[int] | None = None
    if counter is not None:
        try:
            counted = _count_all(requests, counter, spec.concurrency or suite.concurrency)
        except BackendError as exc:
            notes.append(f"{exc.what}: input tokens were approximated instead")
    method = COUNTED if counted is not None else APPROXIMATE
    if counted is None:
        counted = [_approximate(r) for r in requests]
    input_tokens = sum(n * k for n, k in zip(counted, sends, strict=True))
    per, mean = _output_per_case(baseline)
    if mean is None:
        output_tokens = calls * suite.model.max_tokens
        output_method = "max_tokens for every call (no baseline with replies): an upper bound"
    else:
        output_tokens = round(
            sum(per.get(c.id, mean) * k for c, k in zip(cases, sends, strict=True))
        )
        measured = sum(1 for c in cases if c.id in per)
        part = (
            ""
            if measured == len(cases)
            else f": {measured} of {len(cases)} cases measured, the rest at the baseline's mean"
        )
        output_method = (
            f"the baseline's measured replies ({baseline.name if baseline else ''}{part})"
        )
    if suite.tools:
        notes.append("agent cases make a call a step: only each case's first call is counted")
    if suite.scorer.kind == "judge":
        notes.append(f"the judge makes {calls} calls of its own, not in this estimate")
    usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
    price = price_for(suite.model.name)
    if spec.allocation is not None:
        notes.append(spec.allocation)
    if caches_system and counter is not None and method == COUNTED and price and calls > 1:
        system = _system_tokens(spec.prompt.text, suite.model.name, counter)
        if system and system >= price.cache_min_tokens:
            usage = Usage(
                input_tokens=input_tokens - system * calls,
                output_tokens=output_tokens,
                cache_write_tokens=system,
                cache_read_tokens=system * (calls - 1),
            )
            notes.append(
                f"the system prompt ({system} tokens) is cached: written by the first call and "
                "read by the rest"
            )
    if offline:
        usd: float | None = 0.0
        priced = cost(usage, price_as) if price_as else None
    else:
        usd, priced, price_as = cost(usage, suite.model.name, batch=batch), None, None
    if usd is None:
        notes.append(f"{suite.model.name} is not in the price table: its cost is unknown")
    return Estimate(
        suite=spec.suite_name,
        model=f"{suite.model.backend}/{suite.model.name}",
        calls=calls,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        usd=usd,
        input_method=method,
        output_method=output_method,
        priced_as=price_as if offline else None,
        priced_as_usd=priced,
        notes=notes,
    )
