"""The configuration reference, generated from the pydantic models (docs/configuration.md).

``python -m evalgate.config.docgen > docs/configuration.md``; a test keeps the file current.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from evalgate.config.models import (
    AgentSettings,
    AllOfScorer,
    Budget,
    Config,
    ContainsScorer,
    ExactScorer,
    Fields,
    GatePolicy,
    JsonSchemaScorer,
    JudgeCalibration,
    JudgeScorer,
    LabelScorer,
    MaxStepsScorer,
    ModelSettings,
    PythonScorer,
    RegexScorer,
    SealedHoldout,
    SplitPolicy,
    Suite,
    Tool,
    ToolNotUsedScorer,
    ToolSequenceScorer,
    ToolUsedScorer,
)

SECTIONS: list[tuple[str, type[BaseModel], str]] = [
    ("Top level", Config, "The whole file."),
    ("suites.NAME", Suite, "One suite: prompts, cases, model, scorer and policies."),
    ("suites.NAME.fields", Fields, "How case fields map onto evalgate's."),
    ("suites.NAME.model", ModelSettings, "The backend and its settings."),
    ("suites.NAME.gate", GatePolicy, "How the gate decides."),
    (
        "suites.NAME.budget",
        Budget,
        "The most one command (`evalgate run`, a job) may spend on the suite; it stops before "
        "the call that would pass it, keeping what it paid for (exit 3). `--resume` sends the "
        "rest under a budget of its own.",
    ),
    ("suites.NAME.split", SplitPolicy, "Dev / holdout assignment and leak checks."),
    ("suites.NAME.sealed_holdout", SealedHoldout, "Holdout cases encrypted to a public key."),
    ("suites.NAME.tools[]", Tool, "A tool offered to the model (agent cases, docs/agents.md)."),
    ("suites.NAME.agent", AgentSettings, "The agent loop's rules."),
    ("suites.NAME.judge", JudgeCalibration, ""),
    ("scorer: label", LabelScorer, ""),
    ("scorer: exact", ExactScorer, ""),
    ("scorer: contains", ContainsScorer, ""),
    ("scorer: regex", RegexScorer, ""),
    ("scorer: json_schema", JsonSchemaScorer, ""),
    ("scorer: python", PythonScorer, ""),
    ("scorer: judge", JudgeScorer, ""),
    ("scorer: tool_sequence", ToolSequenceScorer, ""),
    ("scorer: tool_used", ToolUsedScorer, ""),
    ("scorer: tool_not_used", ToolNotUsedScorer, ""),
    ("scorer: max_steps", MaxStepsScorer, ""),
    ("scorer: all_of", AllOfScorer, ""),
]


def type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) for a in args)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin is not None:
        inner = ", ".join(type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if annotation is type(None):
        return "null"
    return getattr(annotation, "__name__", str(annotation))


def default_text(field: FieldInfo) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    factory: Any = field.default_factory
    value = factory() if factory is not None else field.default
    if isinstance(value, BaseModel):
        return "(see its section)"
    return f"`{value!r}`"


def field_comment(model: type[BaseModel], name: str) -> str:
    """The comment written above a field in the source, which explains why it exists."""
    import inspect

    lines = inspect.getsource(model).splitlines()
    for index, line in enumerate(lines):
        if line.strip().startswith(f"{name}:"):
            comments: list[str] = []
            back = index - 1
            while back >= 0 and lines[back].strip().startswith("#"):
                comments.insert(0, lines[back].strip().lstrip("# "))
                back -= 1
            return " ".join(comments)
    return ""


def reference() -> str:
    out = [
        "# Configuration reference",
        "",
        "Generated from the pydantic models in `evalgate/config/models.py` by "
        "`python -m evalgate.config.docgen`; do not edit by hand. Unknown keys are errors.",
        "",
    ]
    for title, model, intro in SECTIONS:
        out += [f"## {title}", ""]
        doc = (model.__doc__ or "").strip().splitlines()
        text = intro or (doc[0] if doc else "")
        if text:
            out += [text, ""]
        out += ["| key | type | default | meaning |", "|---|---|---|---|"]
        for name, field in model.model_fields.items():
            key = field.alias or name
            meaning = field.description or field_comment(model, name)
            out.append(
                f"| `{key}` | {type_name(field.annotation)} | {default_text(field)} | "
                f"{meaning.replace('|', '/')} |"
            )
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(reference(), end="")
