"""``evalgate init``: evalgate.yml, cases and a workflow for this repository."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evalgate.cli.context import (
    EXIT_OK,
    Context,
)
from evalgate.cli.options import TEXT_OR_JSON, Subcommands, common_options
from evalgate.errors import UserError
from evalgate.setup import init as setup_init


def cmd_init(ctx: Context) -> int:
    """Write evalgate.yml, the workflow and starter files; ask on a terminal unless --yes."""
    args = ctx.args
    repo = Path(args.dir)
    if not repo.is_dir():
        raise UserError(f"{repo} is not a folder", fix="pass --dir with the repository's root")

    if not args.force:
        # Say so before the first question, not after the last.
        config = repo / args.config
        setup_init.refuse_existing(setup_init.setup_files(repo, config), repo)

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
    given = setup_init.InitOptions(
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
    plan = setup_init.plan_init(repo, repo / args.config, given, chosen_ask)
    result = setup_init.write_init(plan, force=args.force, cwd=Path.cwd())
    ctx.print(setup_init.render_init(result, args.format))
    return EXIT_OK


def add_parser(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    init = sub.add_parser(
        "init",
        parents=[common_options(TEXT_OR_JSON)],
        help="set a repository up: evalgate.yml, the workflow, starter prompt and cases",
        description="Write evalgate.yml, .github/workflows/evalgate.yml and, where none exist, "
        "a starter prompt and case file; add .evalgate/ to .gitignore. It asks for what the "
        "flags leave open, with defaults found in the repository: on a terminal, or one answer "
        "a line from a pipe (an empty line takes the default; it stops if the pipe runs out). "
        "--yes asks nothing. --config is relative to --dir.",
    )
    init.add_argument("--dir", default=".", help="the repository's root (default: .)")
    init.add_argument(
        "--prompts", metavar="GLOB", help="prompt files (default: found, or prompts/*.txt)"
    )
    init.add_argument("--cases", metavar="GLOB", help="case files (default: found, or cases.jsonl)")
    init.add_argument(
        "--backend", choices=setup_init.BACKENDS, help="the model backend (default: fake)"
    )
    init.add_argument("--model", metavar="NAME", help="the model name (default: per backend)")
    init.add_argument(
        "--scorer", choices=setup_init.SCORERS, help="how replies are scored (default: label)"
    )
    init.add_argument(
        "--expected-field",
        "--field",
        dest="field",
        metavar="NAME",
        help="the case field holding the expected answer (default: detected)",
    )
    init.add_argument(
        "--id-field", metavar="NAME", help="the case field naming each case (default: detected)"
    )
    init.add_argument(
        "--input-fields",
        metavar="A,B",
        type=lambda text: [k.strip() for k in text.split(",") if k.strip()],
        help="the case fields the model reads, comma-separated (default: every other field "
        "but ids, such as a ticket or thread number)",
    )
    init.add_argument(
        "--command", metavar="CMD", help="the command backend's program (default: python app.py)"
    )
    init.add_argument("--branch", help="the default branch (default: found in .git, or main)")
    init.add_argument("--yes", action="store_true", help="ask nothing: take the defaults")
    init.add_argument("--force", action="store_true", help="replace evalgate.yml and the workflow")
    init.set_defaults(func=cmd_init)
