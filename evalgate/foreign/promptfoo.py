"""promptfoo's results (``promptfoo eval -o FILE.json``), as its TypeScript types say them.

``OutputFile`` (src/types): ``{evalId, results, config, shareableUrl, metadata}``, ``results``
an ``EvaluateSummaryV3`` (``version: 3``, ``results``, ``prompts``, ``stats``) or the older
``EvaluateSummaryV2`` (``version: 2``, ``table`` too). Each ``EvaluateResult`` is one test, one
prompt, one provider and one repeat: ``testCase`` (its vars, description, assert), ``vars``,
``promptId`` and ``prompt`` (label; raw is the text rendered for the test), ``provider`` (id,
label), ``success``, ``score``, ``failureReason``
(0 none, 1 an assertion failed, 2 an error), ``error``, ``response.output``.

A test is told by its vars and description (promptfoo gives repeats their own ``testIdx``, so
the index names no test across runs); its repeats are the results that share them, each with
its own ``vars.__repeatIndex`` (promptfoo's runtime var). Results that share vars, description
*and* repeat index are different tests that look alike (a tests file with a row twice): they
are told apart by their order in the file, the k-th with the k-th of the other file, and the
gate says how many were. A pass is
promptfoo's own ``success`` (its assertions, weights and threshold); an error is an error, not
a failure. One file gates one prompt and one provider: a file of several is refused.

The same results also come in the two bodies ``promptfoo share`` sends its server (promptfoo's
own tests call them "a version 3 results file" and "a new eval"): ``{data: {version, author,
results, config}}``, ``results`` an ``EvaluateSummaryV2``, and ``{id, createdAt, config,
results, prompts}``, ``results`` the list of ``EvaluateResult`` itself. They are read as the
output file they carry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalgate.errors import RunFileError
from evalgate.foreign.build import (
    ForeignCase,
    ForeignRun,
    digest,
    errored,
    load_json,
    passed,
)
from evalgate.limits import excerpt

VERSIONS = (2, 3)
_ERROR = 2


def _output(data: Any) -> dict[str, Any] | None:
    """The output file (``{evalId, results, config}``) that ``data`` is or carries, or None."""
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("results"), dict) and "evalId" in data and "results" in data["results"]:
        return data
    shared = data.get("data")
    if (
        list(data) == ["data"]
        and isinstance(shared, dict)
        and isinstance(shared.get("results"), dict)
        and "results" in shared["results"]
    ):
        # A share body of version 3: the output file's parts one level down.
        return {"evalId": None, "results": shared["results"], "config": shared.get("config")}
    if (
        isinstance(data.get("results"), list)
        and isinstance(data.get("prompts"), list)
        and "createdAt" in data
        and isinstance(data.get("config"), dict)
    ):
        # A share body of version 4 ("a new eval"): the results themselves, an EvaluateSummaryV3's.
        summary = {"version": 3, "results": data["results"], "prompts": data["prompts"]}
        return {"evalId": data.get("id"), "results": summary, "config": data["config"]}
    return None


def looks_like(data: Any) -> bool:
    return _output(data) is not None


def _dict(value: Any) -> dict[str, Any]:
    """``value`` when it is an object, else an empty one: a file's fields are read as promptfoo's
    types give them, and a field of another shape is as good as absent (never a crash)."""
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _identity_vars(result: dict[str, Any]) -> dict[str, Any]:
    test = _dict(result.get("testCase"))
    given = _dict(test.get("vars")) or _dict(result.get("vars"))
    # promptfoo adds its runtime vars (__evalId, __evalStepId, __repeatIndex) to what it renders.
    return {k: v for k, v in given.items() if not str(k).startswith("__")}


def read(path: Path, data: bytes) -> ForeignRun:
    whole = _output(load_json(path, data, "promptfoo output"))
    if whole is None:
        raise RunFileError(
            "not promptfoo output (no evalId and results.results)",
            where=str(path),
            fix="write it with `promptfoo eval -o FILE.json`",
        )
    summary = whole["results"]
    version = summary.get("version")
    if version not in VERSIONS:
        raise RunFileError(
            f"promptfoo output of version {version!r}: evalgate reads versions 2 and 3",
            where=str(path),
            fix=(
                "write it with a promptfoo of 0.50 or later (`promptfoo eval -o FILE.json`)"
                if isinstance(version, int) and not isinstance(version, bool) and version < 2
                else "a promptfoo newer than this evalgate wrote it: upgrade evalgate"
            ),
        )
    results = summary.get("results")
    if not isinstance(results, list):
        raise RunFileError("promptfoo output without a list of results", where=str(path))
    combos = {(_provider(r), _prompt(r)) for r in results if isinstance(r, dict)}
    if len(combos) > 1:
        # Each pair by its provider and its prompt's label (the prompt as written, which a
        # promptId, a hash, does not show), long enough to tell prompts of one file apart.
        labels = {(_provider(r), _prompt(r)): _label(r) for r in results if isinstance(r, dict)}
        shown = "; ".join(
            sorted(f"{p} with prompt {excerpt(labels[p, q], 60)!r}" for p, q in combos)[:3]
        )
        raise RunFileError(
            f"the file holds {len(combos)} prompt and provider pairs ({shown}): the gate "
            "compares one with one",
            where=str(path),
            fix="run promptfoo with one prompt and one provider per output file (--filter-"
            "providers, --filter-prompts)",
        )
    config = _dict(whole.get("config"))
    first = next((r for r in results if isinstance(r, dict)), {})
    provider, prompt = combos.pop() if combos else ("unknown", "")
    asserts = sorted(
        {
            str(a.get("type"))
            for r in results
            if isinstance(r, dict)
            for a in _list(_dict(r.get("testCase")).get("assert"))
            if isinstance(a, dict)
        }
    )
    grader = _dict(_dict(config.get("defaultTest")).get("options")).get("provider")
    run = ForeignRun(
        format="promptfoo",
        path=path,
        suite=str(config.get("description") or "promptfoo"),
        model=provider,
        model_settings=_dict(first.get("provider")),
        prompt_name=str(_dict(first.get("prompt")).get("label") or "prompt"),
        prompt_text=prompt,
        scorer={"kind": "promptfoo", "assertions": asserts, "grader": grader},
    )
    seen: dict[tuple[str, Any], int] = {}
    alike = 0
    for result in results:
        if not isinstance(result, dict) or not isinstance(result.get("success"), bool):
            run.drop("results without a success flag")
            continue
        test = _dict(result.get("testCase"))
        variables = _identity_vars(result)
        description = test.get("description") or result.get("description")
        identity = {"vars": variables, "description": description}
        name = "pf-" + digest(identity)[:12]
        # The k-th result of this identity and repeat index is the k-th test of that identity.
        key = (name, _repeat_index(result))
        k = seen.get(key, 0)
        seen[key] = k + 1
        if k:
            name = f"{name}-{k + 1}"
            alike += key[1] in (0, None)
        case = ForeignCase(
            id=name,
            input={str(k): v for k, v in variables.items()},
            expected=_expected(test),
            hash=digest({**identity, "assert": test.get("assert")}),
            category=_category(test),
        )
        output = _dict(result.get("response")).get("output")
        answer = output if isinstance(output, str) else None
        # promptfoo fills ``error`` with the assertion's reason as well (failureReason 1), so
        # only failureReason tells an error from a wrong answer; without it (older files), an
        # error is a result with no graded assertions.
        reason_code = result.get("failureReason")
        graded = result.get("gradingResult") is not None
        if reason_code == _ERROR or (
            reason_code is None and result.get("error") and not result["success"] and not graded
        ):
            outcome = errored(str(result.get("error") or "error"), answer)
        else:
            reason = _dict(result.get("gradingResult")).get("reason")
            outcome = passed(result["success"], answer, str(reason) if reason else None)
        run.add(case, outcome)
    if alike:
        run.notes.append(
            f"{alike} {'test shares its' if alike == 1 else 'tests share their'} vars and "
            "description with another test of the file: they are paired by their order among "
            "those (give each a description to pair them by name)"
        )
    return run


def _repeat_index(result: dict[str, Any]) -> Any:
    """promptfoo's ``__repeatIndex`` runtime var of a result (None when it has none)."""
    index = _dict(result.get("vars")).get("__repeatIndex")
    # A number as promptfoo writes it; anything else is a value to tell results apart by.
    return index if isinstance(index, int | float | str | None) else repr(index)


def _expected(test: dict[str, Any]) -> Any:
    """What the report shows as expected: the first assertion's value (as promptfoo rendered
    it into the result's test case), with its type when it is not an equality."""
    asserts = test.get("assert")
    first = asserts[0] if isinstance(asserts, list) and asserts else None
    if not isinstance(first, dict) or first.get("value") is None:
        return None
    value = first["value"]
    return value if first.get("type") == "equals" else f"{first.get('type')}: {value}"


def _provider(result: dict[str, Any]) -> str:
    provider = result.get("provider")
    if isinstance(provider, dict):
        return str(provider.get("id") or provider.get("label") or "unknown")
    return str(provider or "unknown")


def _prompt(result: dict[str, Any]) -> str:
    """The prompt's identity: ``promptId`` (a hash of the prompt as written; ``prompt.raw`` is
    the text rendered for this test), else its label."""
    return str(result.get("promptId") or _dict(result.get("prompt")).get("label") or "")


def _label(result: dict[str, Any]) -> str:
    """The prompt as a person tells it: its label (or its text), else its identity."""
    prompt = _dict(result.get("prompt"))
    return str(prompt.get("label") or prompt.get("raw") or _prompt(result))


def _category(test: dict[str, Any]) -> str | None:
    value = _dict(test.get("metadata")).get("category")
    return str(value) if isinstance(value, str | int) else None
