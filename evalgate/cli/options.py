"""What several commands' parsers share: argument types and help texts."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, TypeAlias

from evalgate.defaults import CONFIG_FILE

# The subcommands action every command module adds its parser to.
Subcommands: TypeAlias = "argparse._SubParsersAction[Any]"

# The --format choices: every command's, and those of a command with no Markdown form, which
# refuses --format markdown (argparse's one line, naming the command) rather than print text
# under the name of Markdown, and whose --help offers text or json only.
FORMATS = ("text", "markdown", "json")
TEXT_OR_JSON = ("text", "json")


def common_options(formats: Sequence[str] = FORMATS) -> argparse.ArgumentParser:
    """The options every command takes, as a parent parser (``parents=[...]``)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--json",
        dest="format",
        action="store_const",
        const="json",
        default=argparse.SUPPRESS,
        help="same as --format json, for scripting",
    )
    common.add_argument(
        "--config", default=CONFIG_FILE, help="path of evalgate.yml (default: %(default)s)"
    )
    common.add_argument(
        "--suite", default=None, help="suite name (needed when the config has several)"
    )
    common.add_argument("--format", choices=formats, default="text", help="output format")
    return common


def shard(text: str) -> tuple[int, int]:
    index, _, total = text.partition("/")
    try:
        i, n = int(index), int(total)
    except ValueError:
        raise argparse.ArgumentTypeError("write it as i/N, e.g. 2/4") from None
    if not 1 <= i <= n:
        raise argparse.ArgumentTypeError("needs 1 <= i <= N")
    return i, n


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def share(text: str) -> float:
    """A score or a share: a finite number in [0, 1] ("0.93", not the percent "93")."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:  # NaN fails this too
        raise argparse.ArgumentTypeError(
            f"{text} is outside 0 to 1: write a score as a share (0.93 for 93%)"
        )
    return value


def non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def at_least_two(text: str) -> int:
    value = int(text)
    if value < 2:
        raise argparse.ArgumentTypeError("needs at least 2 repeats to see flips")
    return value


BATCH_HELP = (
    "send every call through the Message Batches API: half the price, answers within 24 hours; "
    "a restarted job resumes polling the same batch (also: model.options.batch)"
)


SHOW_FAILED_HELP = "wrong and errored cases listed, errors first (default: %(default)s)"
