"""promptfoo's assertions as evalgate checks: which types map onto which scorer, which cannot and
what to do instead, and the CSV ``__expected`` cell syntax."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from evalgate.cases.importers.core import Check, Notes
from evalgate.config import yamlcore
from evalgate.errors import CaseFileError

_ASSERT_KEYS = {"type", "value", "description"}

# promptfoo assertion type -> (evalgate scorer kind, case-sensitive).
MAPPED: dict[str, tuple[str, bool]] = {
    "equals": ("exact", True),
    "contains": ("contains", True),
    "icontains": ("contains", False),
    "contains-all": ("contains", True),
    "icontains-all": ("contains", False),
    "regex": ("regex", True),
    "starts-with": ("regex", True),
    "is-json": ("json_schema", True),
    "llm-rubric": ("judge", True),
}
# Every documented assertion type, so a CSV cell "contains: x" is told from a plain answer.
KNOWN = set(MAPPED) | {
    "contains-any",
    "icontains-any",
    "contains-json",
    "is-html",
    "contains-html",
    "is-sql",
    "contains-sql",
    "is-xml",
    "contains-xml",
    "is-valid-openai-function-call",
    "is-valid-openai-tools-call",
    "is-valid-function-call",
    "tool-call-f1",
    "javascript",
    "python",
    "webhook",
    "rouge-n",
    "bleu",
    "gleu",
    "meteor",
    "levenshtein",
    "latency",
    "cost",
    "perplexity",
    "perplexity-score",
    "answer-relevance",
    "context-faithfulness",
    "context-recall",
    "context-relevance",
    "factuality",
    "model-graded-closedqa",
    "model-graded-factuality",
    "g-eval",
    "similar",
    "classifier",
    "moderation",
    "finish-reason",
    "select-best",
    "max-score",
    "guardrails",
    "word-count",
    "f-score",
    "search-rubric",
    "pi",
    "assert-set",
    "trace-span-count",
    "trace-span-duration",
    "trace-error-spans",
    "skill-used",
    *(f"trajectory:{name}" for name in ("tool-used", "tool-sequence", "tool-args-match")),
    "trajectory:step-count",
    "trajectory:goal-success",
}
_CODE = "port the check to a python scorer (scorer: {kind: python, function: module:function})"
_MODEL_GRADED = "use the judge scorer (kind: judge) with a rubric that says what it checked"
_RUN_METRIC = "evalgate reports cost, latency and truncated replies per run; no per-case check"
FIXES: dict[str, str] = {
    "javascript": _CODE,
    "python": _CODE,
    "webhook": _CODE,
    "contains-any": "any-of matching: use scorer regex with the expected answer a|b",
    "icontains-any": "any-of matching: use scorer regex (ignore_case) with expected a|b",
    "similar": "no similarity scorer: use a judge with a rubric, or a python scorer",
    "levenshtein": "no similarity scorer: use a judge with a rubric, or a python scorer",
    "rouge-n": "no similarity scorer: use a judge with a rubric, or a python scorer",
    "bleu": "no similarity scorer: use a judge with a rubric, or a python scorer",
    "gleu": "no similarity scorer: use a judge with a rubric, or a python scorer",
    "meteor": "no similarity scorer: use a judge with a rubric, or a python scorer",
    "factuality": _MODEL_GRADED,
    "model-graded-closedqa": _MODEL_GRADED,
    "model-graded-factuality": _MODEL_GRADED,
    "g-eval": _MODEL_GRADED,
    "answer-relevance": _MODEL_GRADED,
    "search-rubric": _MODEL_GRADED,
    "cost": _RUN_METRIC,
    "latency": _RUN_METRIC,
    "finish-reason": _RUN_METRIC,
    "perplexity": _RUN_METRIC,
    "perplexity-score": _RUN_METRIC,
    "contains-json": "use scorer json_schema (the whole reply must be JSON), or a python scorer",
}
_NOT_FIX = "a negated check has no evalgate scorer: " + _CODE
_OTHER_FIX = "no evalgate scorer does this: " + _CODE
_CSV_ASSERT = re.compile(
    r"^(not-)?((?:trajectory:)?[a-z][a-z0-9-]*)(?:\(([0-9.]+)\))?(?::\s*(.*))?$", re.S
)

_OPTION_FIXES = {
    "threshold": "ignored: each case scores 0..1 and the gate compares two runs case by case",
    "provider": "ignored: the judge's model is scorer.model in evalgate.yml",
    "weight": "ignored: every case counts once",
    "metric": "ignored: per-category tables come from metadata.category",
}


def check(assertion: dict[str, Any], value: Any, where: str, notes: Notes) -> Check:
    """One assertion (its value already read from a file and rendered with the test's vars)."""
    kind = assertion["type"]
    if kind.removeprefix("not-").startswith("trajectory:"):
        found, why = trajectory_check(kind, value, assertion)
        if why is not None:
            notes.add(f"{kind} assertion", why, where)
        return found
    mapped = MAPPED.get(kind)
    for key in assertion:
        if key not in _ASSERT_KEYS and mapped is not None:
            fix = _OPTION_FIXES.get(key, "not used by evalgate")
            notes.add(f"assertion option {key!r}", fix, where)
    if mapped is None:
        fix = _NOT_FIX if kind.startswith("not-") else FIXES.get(kind, _OTHER_FIX)
        notes.add(f"{kind} assertion", fix, where)
        return Check(kind, None, value, raw=assertion)
    family, sensitive = mapped
    if kind.endswith("contains-all"):
        value = [v.strip() for v in value.split(",")] if isinstance(value, str) else value
    elif kind == "starts-with":
        value = "^" + re.escape(str(value))
    elif kind == "equals" and not isinstance(value, str):
        value = json.dumps(value) if isinstance(value, dict | list) else str(value)
    elif kind == "is-json" and value is not None and not isinstance(value, dict):
        value = _schema(value, where)
    return Check(kind, family, value, sensitive, raw=assertion)


def _schema(value: Any, where: str) -> Any:
    if isinstance(value, str):
        try:
            return yamlcore.load(value)
        except yaml.YAMLError:
            pass
    raise CaseFileError("is-json's value must be a JSON schema", where=where)


# promptfoo's trajectory assertions, as src/assertions/trajectory.ts (promptfoo/promptfoo)
# reads them from the trace's tool spans: a matcher is a tool name or {name | pattern, type}
# (a pattern with * is a glob); tool-used takes a name, a list of names (all must be called;
# with not-, none may be) or {name, min, max} (a count); tool-sequence takes a list (in order,
# others allowed between) or {mode: exact | in_order, steps}; tool-args-match takes {name,
# args | arguments, mode: partial (a JSON subset, the default) | exact, defaults, ignore} and
# passes when any call to the tool matches; step-count counts trace spans of every type.
_GLOB = "a glob pattern (*) in a tool name: evalgate matches tool names exactly; list the tools"
_NEGATED = "a negated trajectory check has no evalgate scorer: " + _CODE
_TRAJECTORY_FIXES = {
    "trajectory:step-count": (
        "promptfoo counts the trace's spans (model calls, tools, messages, reasoning); "
        "evalgate's max_steps counts model calls and has no minimum: set agent.max_steps or a "
        "max_steps scorer by hand"
    ),
    "trajectory:goal-success": _MODEL_GRADED,
}


def _tool_name(matcher: Any) -> tuple[str | None, str | None]:
    """(the tool's name, None) for a matcher evalgate matches the same way, else (None, why)."""
    if isinstance(matcher, dict):
        if set(matcher) - {"name", "pattern", "type", "min", "max"}:
            return None, f"matcher keys {sorted(matcher)}: evalgate reads name and type only"
        if matcher.get("type", "tool") != "tool":
            return None, f"steps of type {matcher['type']!r}: evalgate's trajectory is tool calls"
        matcher = matcher.get("pattern") or matcher.get("name")
    if not isinstance(matcher, str) or not matcher:
        return None, "a step without a tool name"
    if "*" in matcher:
        return None, _GLOB
    return matcher, None


def _names_of(value: Any) -> tuple[list[str], str | None]:
    items = value if isinstance(value, list) else [value]
    names: list[str] = []
    for item in items:
        name, why = _tool_name(item)
        if why is not None:
            return [], why
        names.append(str(name))
    return names, None


def trajectory_check(kind: str, value: Any, raw: Any) -> tuple[Check, str | None]:
    """A promptfoo trajectory assertion as an evalgate check, or a skipped one and why."""
    skipped = Check(kind, None, value, raw=raw)
    negated = kind.startswith("not-")
    base = kind.removeprefix("not-")
    if base in _TRAJECTORY_FIXES:
        return skipped, _NEGATED if negated else _TRAJECTORY_FIXES[base]
    if base == "trajectory:tool-used":
        if isinstance(value, dict):
            if negated:
                return skipped, _NEGATED
            if value.get("max") is not None or value.get("min", 1) != 1:
                return skipped, (
                    "a count of calls (min / max): evalgate's tool_used checks that a tool was "
                    "called at least once"
                )
        names, why = _names_of(value)
        if why is not None:
            return skipped, why
        family = "tool_not_used" if negated else "tool_used"
        return Check(kind, family, names, raw=raw), None
    if negated:
        return skipped, _NEGATED
    if base == "trajectory:tool-sequence":
        steps, mode = (value, "in_order") if isinstance(value, list) else (None, None)
        if isinstance(value, dict):
            steps, mode = value.get("steps"), value.get("mode", "in_order")
        if not isinstance(steps, list) or not steps or mode not in ("exact", "in_order"):
            return skipped, "not a list of steps with mode exact or in_order, as promptfoo takes"
        names, why = _names_of(steps)
        if why is not None:
            return skipped, why
        return Check(kind, "tool_sequence", {"tool_sequence": names, "match": mode}, raw=raw), None
    if base == "trajectory:tool-args-match":
        if not isinstance(value, dict):
            return skipped, "its value must be {name, args}, as promptfoo takes it"
        name, why = _tool_name({k: v for k, v in value.items() if k in ("name", "pattern", "type")})
        args = value.get("args", value.get("arguments"))
        if why is not None:
            return skipped, why
        if args is None:
            return skipped, "no args: promptfoo requires them"
        if value.get("defaults") is not None or value.get("ignore") is not None:
            return skipped, (
                "defaults / ignore: evalgate compares the input as given; write args without "
                "the ignored keys (mode partial)"
            )
        mode = value.get("mode", "partial")
        if mode == "partial":
            step = {"name": name, "input": args}
        elif mode == "exact":
            # Deep equality, as promptfoo's exact mode (1 equals 1.0, true is not 1).
            step = {"name": name, "input_schema": {"const": args}}
        else:
            return skipped, f"mode {mode!r}: promptfoo takes partial or exact"
        return Check(kind, "tool_used", [step], raw=raw), None
    return skipped, _OTHER_FIX


def parse_assertion(text: str) -> dict[str, Any] | None:
    """A CSV ``__expected`` cell as promptfoo reads it: ``type: value``, else an equals check."""
    text = text.strip()
    if not text:
        return None
    for legacy, kind in (("fn:", "javascript"), ("eval:", "javascript"), ("grade:", "llm-rubric")):
        if text.startswith(legacy):
            return {"type": kind, "value": text[len(legacy) :].strip()}
    match = _CSV_ASSERT.match(text)
    if match and match.group(2) in KNOWN:
        negated, kind, threshold, value = match.groups()
        assertion: dict[str, Any] = {"type": (negated or "") + kind}
        if value is not None:
            assertion["value"] = value.strip()
        if threshold is not None:
            assertion["threshold"] = float(threshold)
        return assertion
    return {"type": "equals", "value": text}
