"""``evalgate completion``: a shell completion script built from the parser."""

from __future__ import annotations

import argparse
from typing import Any

from evalgate.cli.context import (
    EXIT_OK,
    Context,
)
from evalgate.cli.options import TEXT_OR_JSON, Subcommands, common_options


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

        ctx.write(json.dumps({"shell": "bash", "script": script}, indent=2) + "\n")
    else:
        ctx.write(script)
    return EXIT_OK


def add_parser(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    completion = sub.add_parser(
        "completion", parents=[common_options(TEXT_OR_JSON)], help="print a bash completion script"
    )
    completion.set_defaults(func=cmd_completion)
