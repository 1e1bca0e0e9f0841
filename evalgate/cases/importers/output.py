"""What ``evalgate import`` writes and prints: JSONL, the summary, the evalgate.yml snippet."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from evalgate.cases.importers.core import Conversion, Mapped, Note, Unscored
from evalgate.cases.split import (
    STARTING_HOLDOUT_FRACTION,
    STARTING_HOLDOUT_MIN_CASES,
    starting_holdout_fraction,
)
from evalgate.cases.templating import variables
from evalgate.limits import counted

DEFAULT_MODEL: dict[str, Any] = {"backend": "anthropic", "name": "claude-haiku-4-5"}


class ImportReport(BaseModel):
    """The summary of one import (``--json`` prints it as is)."""

    model_config = ConfigDict(extra="forbid")

    format: str
    source: str
    noun: str
    read: int
    imported: int
    out: str | None
    unscored_out: str | None
    scorer: dict[str, Any]
    inputs: list[str]
    mapped: list[Mapped]
    unmapped: list[Note]
    unscored: list[Unscored]
    hints: list[str]
    config_snippet: str | None = None


def unscored_path(out: Path) -> Path:
    """Where cases the suite's scorer cannot check are written: beside the case file."""
    return out.with_name(out.name.removesuffix(out.suffix) + ".unscored" + (out.suffix or ".jsonl"))


def jsonl(records: list[tuple[str, dict[str, Any]]]) -> str:
    return "".join(json.dumps(record, ensure_ascii=False) + "\n" for _, record in records)


def report_of(
    conversion: Conversion, out: str | None, unscored_out: str | None, snippet: str | None
) -> ImportReport:
    source = conversion.source
    return ImportReport(
        format=source.format,
        source=str(source.path),
        noun=source.noun,
        read=source.read,
        imported=len(conversion.records),
        out=out,
        unscored_out=unscored_out if conversion.unscored else None,
        scorer=conversion.plan.config,
        inputs=conversion.inputs,
        mapped=source.notes.mapped_list(),
        unmapped=list(source.notes.unmapped.values()),
        unscored=conversion.unscored_list,
        hints=source.hints,
        config_snippet=snippet,
    )


def _scorer_text(scorer: dict[str, Any]) -> str:
    settings = ", ".join(
        f"{k}: {json.dumps(v)}" for k, v in scorer.items() if k not in ("kind", "model", "rubric")
    )
    return f"{scorer['kind']}" + (f" ({settings})" if settings else "")


def render_text(report: ImportReport) -> str:
    """The summary a person reads: what was imported, what mapped, what did not and what to do."""
    where = f" into {report.out}" if report.out else ""
    noun = report.noun.removesuffix("s") if report.read == 1 else report.noun
    lines = [
        f"Imported {report.imported} of {report.read} {report.format} {noun} from "
        f"{report.source}{where}."
        if report.imported
        else f"Imported none of the {report.read} {report.format} {noun} of {report.source}.",
        f"Scorer: {_scorer_text(report.scorer)}.",
    ]
    if report.mapped:
        lines += ["", "Mapped:"]
        width = max(len(m.source) for m in report.mapped)
        # The answer the scorer checks first, then inputs, then the rest.
        for m in sorted(report.mapped, key=lambda m: not m.to.startswith("expected")):
            lines.append(f"  {m.source:<{width}}  ->  {m.to}  ({m.count})")
    if report.unmapped:
        lines += ["", "Not mapped (count, then what to do):"]
        for note in report.unmapped:
            lines.append(f"  {note.what}: {note.count}")
            lines += textwrap.wrap(note.fix, 96, initial_indent="    ", subsequent_indent="    ")
            if note.at:
                more = ", ..." if note.count > len(note.at) else ""
                lines.append(f"    at {', '.join(note.at)}{more}")
    if report.unscored:
        target = (
            "so nothing was written"
            if not report.imported
            else f"written with expected null to {report.unscored_out}"
            if report.unscored_out
            else "left out (use --out FILE to keep them beside it)"
        )
        lines += [
            "",
            f"Not scored: {len(report.unscored)} {report.noun} the {report.scorer['kind']} "
            f"scorer cannot check as the source meant, {target}:",
        ]
        for u in report.unscored:
            lines.append(f"  {u.id}  {u.where}  {u.reason}")
    if report.hints:
        lines += ["", "Hints:"]
        for hint in report.hints:
            first, _, rest = hint.partition("\n")
            lines += textwrap.wrap(first, 96, initial_indent="  ", subsequent_indent="  ")
            if rest:
                lines += ["    | " + line for line in rest.splitlines()]
    if report.out and report.config_snippet is None and report.imported:
        lines += [
            "",
            "Next: add --config-snippet to print an evalgate.yml for these cases, write the",
            "system prompt into prompts/v1.txt and run `evalgate run v1` (docs/importers.md).",
        ]
    return "\n".join(lines) + "\n"


def template_for(inputs: list[str]) -> str:
    """The user turn: each input field between tags named after it (data, not instructions)."""
    if not inputs:
        return "{{ input }}\n"
    return "".join(f"<{name}>\n{{{{ {name} }}}}\n</{name}>\n" for name in inputs)


def _flow(value: Any) -> str:
    """A value as one line of YAML (plain when that is safe, quoted when not)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000)
    return text.removesuffix("\n...\n").strip()


def _block(key: str, value: Any, indent: int) -> str:
    text = yaml.safe_dump({key: value}, sort_keys=False, default_flow_style=False, width=100)
    return textwrap.indent(text, " " * indent)


def _split_lines(cases: int) -> list[str]:
    """The split a new suite of ``cases`` starts with: no holdout while it is small, so pull
    requests have dev cases to run (the default fraction would hash some away)."""
    fraction = starting_holdout_fraction(cases)
    if fraction:
        why = (
            f"# {counted(cases, 'case')}: about {fraction:.0%} of groups are held out for releases."
        )
    else:
        why = (
            f"# {counted(cases, 'case')}: too few for a holdout yet (every case is dev); set "
            f"holdout_fraction: {STARTING_HOLDOUT_FRACTION} at about "
            f"{STARTING_HOLDOUT_MIN_CASES} cases."
        )
    return ["    " + why, "    split:", f"      holdout_fraction: {fraction}"]


def config_snippet(
    conversion: Conversion, cases: str, suite: str, source_arg: str, *, model: Any = None
) -> str:
    """A whole evalgate.yml for the imported cases (its suite can be pasted into another)."""
    source = conversion.source
    chosen = model or source.model or DEFAULT_MODEL
    template = template_for(conversion.inputs)
    own = source.user_turn
    names = variables(own) if own else None
    if own and names is not None and names <= set(conversion.inputs) | {"input"}:
        template = own.rstrip("\n") + "\n"  # the source's own user turn, vars and all
    lines = [
        f"# evalgate.yml for cases imported from {source_arg} ({source.format}).",
        "# Write your system prompt into prompts/v1.txt (a version's name is its file stem),",
        "# then `evalgate run v1`. Paths are relative to this file.",
        "version: 1",
        "suites:",
        f"  {suite}:",
        "    prompts: prompts/*.txt",
        f"    cases: {_flow(cases)}",
        f"    # Or read {source_arg} itself, without converting (the same cases and ids):",
        f"    # cases: {_flow(source_arg)}",
        f"    # cases_format: {source.format}",
        "    fields:",
        f"      input: {_flow(conversion.inputs)}",
        "    template: |",
        *("      " + line for line in template.splitlines()),
        _block("model", chosen, 4).rstrip("\n"),
        _block("scorer", conversion.plan.config, 4).rstrip("\n"),
        *_split_lines(len(conversion.records)),
    ]
    records = [r for _, r in conversion.records + conversion.unscored]
    tool_names = sorted(
        {str(name) for record in records for name in record.get("fixtures") or {}}
        | (
            {
                step if isinstance(step, str) else str(step.get("name"))
                for record in records
                for step in _expected_steps(record.get("expected"))
                if isinstance(step, str | dict)
            }
            if conversion.plan.kind in ("tool_sequence", "tool_used", "tool_not_used", "all_of")
            else set()
        )
    )
    if tool_names:
        lines.append("    # The tools the cases call: describe each, give its input schema,")
        lines.append("    # and add each case's fixtures (see docs/agents.md).")
        lines.append("    tools:")
        lines += [
            f"      - {{name: {_flow(name)}, input_schema: {{type: object}}}}"
            for name in tool_names
        ]
    if conversion.plan.kind == "python":
        lines.append(
            "    # No assertion maps onto a scorer: write scorers.py with check(expected, reply),"
        )
        lines.append("    # where expected is the list of the source's assertions.")
    return "\n".join(lines) + "\n"


def _expected_steps(expected: Any) -> list[Any]:
    """The calls a trajectory case names: its list, its ``tool_sequence`` list, or those of an
    all_of's members (an object keyed by kind)."""
    if isinstance(expected, dict):
        if isinstance(expected.get("tool_sequence"), list):
            return list(expected["tool_sequence"])
        return [
            step
            for kind in ("tool_sequence", "tool_used", "tool_not_used")
            for step in _expected_steps(expected.get(kind))
        ]
    return expected if isinstance(expected, list) else []
