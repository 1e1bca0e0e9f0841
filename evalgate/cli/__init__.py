"""The composition root: reads argv and the environment, builds the real backend and clients,
calls the pipeline, prints, and maps errors to exit codes (0 ok, 1 failed gate, 2 user error).

The commands live in the modules beside this one, by topic; this one builds the parser and runs
one command. Only the module of the command asked for is imported (``COMMANDS`` names each
command's module): `evalgate gate` on two run files never pays for the SDKs, the holdout's
cryptography or the templates that `run` needs, and `evalgate --version` imports no command.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import itertools
import json
import os
import sys
import typing
from collections.abc import Iterator, Sequence
from typing import TextIO

from evalgate import __version__
from evalgate.cli.context import EXIT_OK, EXIT_USAGE, Context
from evalgate.cli.options import common_options
from evalgate.report.escape import escape, printed

# Each command's module (beside this one), in the order `evalgate --help` lists them; a module
# adds the parsers of the commands named here with its add_parser(sub, common).
COMMANDS: dict[str, str] = {
    "demo": "demo",
    "run": "run",
    "noise": "noise",
    "gate": "gate",
    "split": "split",
    "holdout": "holdout",
    "release": "release",
    "audit": "audit",
    "judge": "judge",
    "action": "action",
    "baseline": "baseline",
    "merge": "merge",
    "init": "init",
    "doctor": "doctor",
    "completion": "completion",
    "import": "importing",
    "list": "saved",
    "report": "saved",
    "compare": "compare",
    "history": "history",
}


class UsageExit(SystemExit):
    """argparse's exit on a usage error, keeping the message (for a --json error object)."""

    def __init__(self, message: str) -> None:
        super().__init__(EXIT_USAGE)
        self.message = message


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error keeps its message for main() to report as JSON too."""

    def error(self, message: str) -> typing.NoReturn:
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise UsageExit(message)


def wants_json(argv: Sequence[str]) -> bool:
    """Whether the command line asks for JSON (read before parsing, for usage errors too)."""
    args = list(argv)
    if "--json" in args or "--format=json" in args:
        return True
    return any(a == "--format" and b == "json" for a, b in itertools.pairwise(args))


def error_document(
    message: str,
    *,
    kind: str,
    exit_code: int,
    where: str | None = None,
    fix: str | None = None,
    what: str | None = None,
) -> str:
    """The JSON object a command prints on stdout for an error when --json was asked for."""
    error = {
        "kind": kind,
        "message": message,
        "what": what or message,
        "where": where,
        "fix": fix,
        "exit_code": exit_code,
    }
    return json.dumps({"error": error}, indent=2) + "\n"


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or with ``command`` (a name in ``COMMANDS``) of that one
    alone, which imports only its module; "" builds the parser of no command (for --version)."""
    common = common_options()

    parser = Parser(
        prog="evalgate",
        description="Run prompt versions over labelled cases, compare runs case by case, and gate changes.",
        epilog="Exit codes: 0 ok, 1 a failed gate, 2 a usage or input error, 3 an incomplete run.",
    )
    parser.add_argument("--version", action="version", version=f"evalgate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    if command is None:
        modules = list(dict.fromkeys(COMMANDS.values()))
    else:
        modules = [COMMANDS[command]] if command else []
    for module in modules:
        importlib.import_module(f"evalgate.cli.{module}").add_parser(sub, common)
    return parser


@contextlib.contextmanager
def _collector_paused(freeze: bool) -> Iterator[None]:
    """The cycle collector paused while a command's modules import: their classes, functions and
    pydantic's schemas are thousands of containers and no garbage, and every 700 start a pass
    over all that is alive. With ``freeze`` (the process is this one command), what they made
    is then moved out of the collector's sight for good (gc.freeze), so that the command's own
    passes need not walk it again (about 6% of `gate`'s instructions). A caller that runs
    many commands in one process (the tests) keeps every object collectable."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if enabled:
            gc.enable()


def _command_of(argv: Sequence[str]) -> str | None:
    """The command a command line names before parsing (argparse's top level takes only
    --help and --version before it): its name, "" for --version alone, None when unknown (the
    whole parser then answers, with its usage and the list of commands)."""
    if not argv:
        return None
    if argv[0] in COMMANDS:
        return argv[0]
    return "" if argv[0] == "--version" else None


def main(
    argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    from_command_line = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = wants_json(argv)
    command = _command_of(argv)
    with _collector_paused(freeze=from_command_line):
        parser = build_parser(command)
    try:
        args = parser.parse_args(argv)
    except UsageExit as exc:
        if as_json:
            out.write(
                printed(error_document(exc.message, kind="usage", exit_code=EXIT_USAGE), "json")
            )
        raise
    # Imported once the command line is read: `--version` and `--help` need none of it.
    from evalgate.errors import EvalgateError

    ctx = Context(args, out, err)
    try:
        code: int = args.func(ctx)
        return code
    except EvalgateError as exc:
        # One line, whatever the message quotes: no text of a case can start a workflow command.
        err.write(f"error: {escape(str(exc), 'log')}\n")
        if as_json:
            out.write(
                printed(
                    error_document(
                        str(exc),
                        kind=type(exc).__name__,
                        exit_code=exc.exit_code,
                        what=getattr(exc, "what", None),
                        where=getattr(exc, "where", None),
                        fix=getattr(exc, "fix", None),
                    ),
                    "json",
                )
            )
        return exc.exit_code
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return 130
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away: not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
