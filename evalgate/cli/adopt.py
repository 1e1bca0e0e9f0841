"""Adoption and integration: import, init, doctor, completion, the action, baseline pull."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

from evalgate.cli.context import (
    EXIT_GATE_FAILED,
    EXIT_OK,
    Context,
)
from evalgate.errors import UserError
from evalgate.setup import doctor
from evalgate.setup import init as onboard

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
    if out is None:
        ctx.out.write(jsonl(conversion.records))
        ctx.err.write(text)
        return EXIT_OK
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(jsonl(conversion.records), encoding="utf-8")
    if side is not None and conversion.unscored:
        side.write_text(jsonl(conversion.unscored), encoding="utf-8")
    if snippet is not None and args.format != "json":
        # The snippet is what stdout is for (`> evalgate.yml`); the summary goes to stderr.
        ctx.out.write(snippet)
        ctx.err.write(text)
    else:
        ctx.out.write(text)
    return EXIT_OK


def completion_script(parser: argparse.ArgumentParser) -> str:
    """A bash completion script for every subcommand and its options, built from the parser."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    cases = []
    for name, child in sub.choices.items():
        words = sorted(
            {o for a in child._actions for o in a.option_strings}
            | (set(nested.choices) if (nested := _subparsers(child)) else set())
        )
        cases.append(f'    {name}) words="{" ".join(words)}" ;;')
    commands = " ".join(sub.choices)
    body = "\n".join(cases)
    return (
        '# bash completion for evalgate: eval "$(evalgate completion)"\n'
        "_evalgate() {\n"
        '  local cur="${COMP_WORDS[COMP_CWORD]}" words\n'
        '  if [ "$COMP_CWORD" -eq 1 ]; then\n'
        f'    COMPREPLY=($(compgen -W "{commands} --help --version" -- "$cur")); return\n'
        "  fi\n"
        '  case "${COMP_WORDS[1]}" in\n'
        f"{body}\n"
        "  esac\n"
        '  COMPREPLY=($(compgen -W "$words" -f -- "$cur"))\n'
        "}\n"
        "complete -F _evalgate evalgate\n"
    )


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[Any] | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def cmd_completion(ctx: Context) -> int:
    from evalgate.cli import build_parser  # the parser is built by the package's root

    script = completion_script(build_parser())
    if ctx.args.format == "json":
        import json

        ctx.out.write(json.dumps({"shell": "bash", "script": script}, indent=2) + "\n")
    else:
        ctx.out.write(script)
    return EXIT_OK


def cmd_init(ctx: Context) -> int:
    """Write evalgate.yml, the workflow and starter files; ask on a terminal unless --yes."""
    args = ctx.args
    repo = Path(args.dir)
    if not repo.is_dir():
        raise UserError(f"{repo} is not a folder", fix="pass --dir with the repository's root")

    def ask(question: str) -> str:
        ctx.err.write(question)
        ctx.err.flush()
        try:
            return input()
        except EOFError:
            raise UserError("no answer (end of input)", fix="pass --yes for the defaults") from None

    answered = 0

    def ask_pipe(question: str) -> str:
        # Not a terminal: one answer a line, echoed so that a log shows what was taken.
        nonlocal answered
        line = sys.stdin.readline() if sys.stdin is not None else ""
        if not line:
            asked = question.split(" [")[0].split(" (")[0]
            raise UserError(
                f"init asks questions and stdin is not a terminal: no answer to {asked!r} "
                f"after {answered} answer(s)",
                fix="pipe one answer a line (an empty line takes the default), pass the "
                "flags (evalgate init --help), or pass --yes to take every default",
            )
        answered += 1
        answer = line.rstrip("\r\n")
        ctx.err.write(f"{question}{answer}\n")
        return answer

    tty = sys.stdin is not None and sys.stdin.isatty()
    chosen_ask = None if args.yes else (ask if tty else ask_pipe)
    given = onboard.InitOptions(
        prompts=args.prompts,
        cases=args.cases,
        backend=args.backend,
        model=args.model,
        scorer=args.scorer,
        field=args.field,
        command=args.command,
        suite=args.suite,
        branch=args.branch,
        id_field=args.id_field,
        input_fields=args.input_fields,
    )
    plan = onboard.plan_init(repo, repo / args.config, given, chosen_ask)
    result = onboard.write_init(plan, force=args.force, cwd=Path.cwd())
    ctx.print(onboard.render_init(result, args.format))
    return EXIT_OK


def cmd_doctor(ctx: Context) -> int:
    repo = Path(ctx.args.dir)
    report = doctor.doctor(repo, repo / ctx.args.config, ctx.args.suite, env=ctx.env)
    ctx.print(doctor.render_doctor(report, ctx.args.format))
    return EXIT_GATE_FAILED if report.failed else EXIT_OK


def cmd_action(ctx: Context) -> int:
    from evalgate.action.main import action

    return action(ctx.env, ctx.out, ctx.err)


def cmd_baseline_pull(ctx: Context) -> int:
    """Fetch the default branch's baseline artefact, as the pull-request gate does."""
    from evalgate.publish import github as gh

    token = ctx.env.get("GITHUB_TOKEN") or ctx.env.get("GH_TOKEN")
    if not token:
        raise UserError(
            "baseline pull needs a token to read workflow artefacts",
            fix="set GITHUB_TOKEN (a token with actions: read on the repository)",
        )
    api = ctx.env.get("GITHUB_API_URL", "https://api.github.com")
    repo = gh.get_repository(gh.connect(token, api), ctx.args.repo)
    branch = ctx.args.branch or repo.default_branch
    ref = gh.find_baseline(repo, ctx.args.artifact, branch, prefer_sha=ctx.args.sha)
    if ref is None:
        raise UserError(
            f"no unexpired {ctx.args.artifact!r} artefact from a push, scheduled or manual run "
            f"on {branch}",
            fix="run the baseline job on the default branch (or wait for its weekly run)",
        )
    out = Path(ctx.args.out)
    folder = gh.download_artifact(ref, token, out)
    ctx.print(f"baseline from {ref.head_sha[:12]} ({ref.created_at:%Y-%m-%d}, run {ref.html_url})")
    for path in sorted(folder.glob("*.json")):
        # One file per suite, where `evalgate gate --baseline` finds it.
        shutil.copy(path, out / path.name)
        ctx.print(f"  {out / path.name}")
    return EXIT_OK
