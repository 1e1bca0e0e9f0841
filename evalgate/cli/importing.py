"""``evalgate import``: cases from other tools' formats (promptfoo, Langfuse, Inspect, ...)."""

from __future__ import annotations

import argparse
from pathlib import Path

from evalgate.cases.importers import FORMATS
from evalgate.cli.context import (
    EXIT_OK,
    Context,
)
from evalgate.cli.options import TEXT_OR_JSON, Subcommands, common_options
from evalgate.errors import UserError

IMPORT_SCORERS = ("exact", "contains", "regex", "json_schema", "judge", "label", "python")


def cmd_import(ctx: Context) -> int:
    """Convert another tool's case file to evalgate JSONL, with a summary of what mapped."""
    from pydantic import TypeAdapter

    from evalgate.cases.importers import convert, validate
    from evalgate.cases.importers.output import (
        config_snippet,
        jsonl,
        render_text,
        report_of,
        unscored_path,
    )
    from evalgate.config.models import Fields, ScorerConfig
    from evalgate.scorers.base import needs_expected

    args = ctx.args
    to_stdout = args.out == "-"
    if args.config_snippet and to_stdout:
        raise UserError(
            "--config-snippet names the case file in the snippet, so it needs --out FILE",
            fix="pass --out cases.jsonl",
        )
    source = Path(args.file)
    target = "ideal" if args.source_format == "openai-evals" else "target"
    rename = {
        standard: own
        for standard, own in (
            ("input", args.input_field),
            (target, args.target_field),
            ("id", args.id_field),
            ("choices", args.choices_field),
        )
        if own is not None
    }
    conversion = convert(args.source_format, source, scorer_kind=args.scorer, rename=rename)
    scorer = TypeAdapter(ScorerConfig).validate_python(conversion.plan.config)
    validate(conversion, Fields(input=conversion.inputs), need_expected=needs_expected(scorer))
    out = None if to_stdout else Path(args.out)
    side = unscored_path(out) if out is not None else None
    written = [p for p in (out, side if conversion.unscored else None) if p is not None]
    for path in written:
        if path.exists() and not args.force:
            raise UserError(f"{path} exists", fix="pass --force to replace it, or choose --out")
    snippet = None
    if args.config_snippet:
        snippet = config_snippet(conversion, args.out, args.suite or "main", args.file)
    report = report_of(
        conversion, None if to_stdout else args.out, str(side) if side else None, snippet
    )
    text = report.model_dump_json(indent=2) + "\n" if args.format == "json" else render_text(report)
    if not conversion.records:
        # Nothing the scorer can check: no case file (a suite of it would gate nothing), the
        # summary of why, and one line saying what to do.
        if args.format != "json":
            ctx.write(text, err=True)
        raise UserError(
            f"no {source.name} {report.noun} can be scored by the {report.scorer['kind']} "
            f"scorer ({report.read} read, {len(conversion.unscored)} not scored); nothing was "
            "written",
            where=str(source),
            fix=f"choose the scorer their checks need (see 'Not scored' above) with --scorer "
            f"{'|'.join(IMPORT_SCORERS)}, or add checks the scorer can read",
        )
    if out is None:
        ctx.write(jsonl(conversion.records), "json")
        ctx.write(text, err=True)
        return EXIT_OK
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(jsonl(conversion.records), encoding="utf-8")
    if side is not None and conversion.unscored:
        side.write_text(jsonl(conversion.unscored), encoding="utf-8")
    if snippet is not None and args.format != "json":
        # The snippet is what stdout is for (`> evalgate.yml`); the summary goes to stderr.
        ctx.write(snippet, "text")
        ctx.write(text, err=True)
    else:
        ctx.write(text)
    return EXIT_OK


def add_parser(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    import_ = sub.add_parser(
        "import",
        parents=[common_options(TEXT_OR_JSON)],
        help="convert promptfoo, OpenAI evals, Inspect or Langfuse cases to evalgate JSONL",
        description="Convert another tool's case file to evalgate JSONL and say what mapped, "
        "what did not, and what to do about it (docs/importers.md). The summary goes to "
        "stdout, or to stderr when stdout carries the cases (--out -) or the snippet.",
    )
    import_.add_argument(
        "source_format", metavar="FORMAT", choices=FORMATS, help="one of: " + ", ".join(FORMATS)
    )
    import_.add_argument(
        "file", help="the file to convert (promptfooconfig.yaml, samples.jsonl, ...)"
    )
    import_.add_argument(
        "--out",
        default="cases.jsonl",
        metavar="FILE",
        help="evalgate JSONL to write, '-' for stdout (default: %(default)s); cases the scorer "
        "cannot check go beside it in FILE.unscored.jsonl",
    )
    import_.add_argument("--force", action="store_true", help="replace files that exist")
    import_.add_argument(
        "--config-snippet",
        action="store_true",
        help="print an evalgate.yml for the cases (fields, template, model, scorer) to stdout",
    )
    import_.add_argument(
        "--scorer",
        choices=IMPORT_SCORERS,
        help="the suite's scorer kind (default: the kind most cases can be scored by)",
    )
    for flag, what in (
        ("--input-field", "input"),
        ("--target-field", "target (inspect) or ideal (openai-evals)"),
        ("--id-field", "id (inspect)"),
        ("--choices-field", "choices (inspect)"),
    ):
        import_.add_argument(
            flag,
            metavar="NAME",
            help=f"the dataset's own name for the {what} field, as an Inspect FieldSpec says",
        )
    import_.set_defaults(func=cmd_import)
