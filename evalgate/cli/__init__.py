"""The composition root: reads argv and the environment, builds the real backend and clients,
calls the pipeline, prints, and maps errors to exit codes (0 ok, 1 failed gate, 2 user error).

The commands live in the modules beside this one, by topic; this one builds the parser and runs
one command.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import typing
from collections.abc import Sequence
from typing import TextIO

from evalgate import __version__, onboard
from evalgate.cli.adopt import (
    IMPORT_SCORERS,
    cmd_action,
    cmd_baseline_pull,
    cmd_completion,
    cmd_doctor,
    cmd_import,
    cmd_init,
)
from evalgate.cli.bench import (
    HTML_HELP,
    cmd_compare,
    cmd_demo,
    cmd_list,
    cmd_merge,
    cmd_report,
    cmd_run,
)
from evalgate.cli.context import EXIT_OK, EXIT_USAGE, Context
from evalgate.cli.gating import cmd_gate, cmd_noise
from evalgate.cli.judge import cmd_judge
from evalgate.cli.splits import cmd_audit, cmd_holdout, cmd_release, cmd_split
from evalgate.config import DEFAULT_CONFIG
from evalgate.errors import EvalgateError
from evalgate.importers import FORMATS
from evalgate.report.escape import escape


def _shard(text: str) -> tuple[int, int]:
    index, _, total = text.partition("/")
    try:
        i, n = int(index), int(total)
    except ValueError:
        raise argparse.ArgumentTypeError("write it as i/N, e.g. 2/4") from None
    if not 1 <= i <= n:
        raise argparse.ArgumentTypeError("needs 1 <= i <= N")
    return i, n


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _at_least_two(text: str) -> int:
    value = int(text)
    if value < 2:
        raise argparse.ArgumentTypeError("needs at least 2 repeats to see flips")
    return value


BATCH_HELP = (
    "send every call through the Message Batches API: half the price, answers within 24 hours; "
    "a restarted job resumes polling the same batch (also: model.options.batch)"
)


SHOW_FAILED_HELP = "wrong and errored cases listed, errors first (default: %(default)s)"


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


def build_parser() -> argparse.ArgumentParser:
    common = Parser(add_help=False)
    common.add_argument(
        "--json",
        dest="format",
        action="store_const",
        const="json",
        default=argparse.SUPPRESS,
        help="same as --format json, for scripting",
    )
    common.add_argument(
        "--config", default=DEFAULT_CONFIG, help="path of evalgate.yml (default: %(default)s)"
    )
    common.add_argument(
        "--suite", default=None, help="suite name (needed when the config has several)"
    )
    common.add_argument(
        "--format", choices=["text", "markdown", "json"], default="text", help="output format"
    )

    parser = Parser(
        prog="evalgate",
        description="Run prompt versions over labelled cases, compare runs case by case, and gate changes.",
        epilog="Exit codes: 0 ok, 1 a failed gate, 2 a usage or input error, 3 an incomplete run.",
    )
    parser.add_argument("--version", action="version", version=f"evalgate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser(
        "demo", parents=[common], help="run the bundled example on the offline fake model"
    )
    demo.add_argument(
        "--show", type=int, default=10, help="cases listed per section (default: %(default)s)"
    )
    demo.set_defaults(func=cmd_demo)

    run = sub.add_parser(
        "run", parents=[common], help="run one prompt version over the suite's cases"
    )
    run.add_argument("version", help="prompt version (the prompt file's stem)")
    run.add_argument("--limit", type=_positive, help="only the first N cases")
    run.add_argument("--no-save", action="store_true", help="do not save the run")
    run.add_argument("-v", "--verbose", action="store_true", help="print each case as it is scored")
    run.add_argument(
        "--cases",
        action="append",
        metavar="FILE",
        help="case file instead of the config's (repeatable)",
    )
    run.add_argument(
        "--repeats", type=_positive, default=1, help="send each case K times (default: 1)"
    )
    run.add_argument(
        "--concurrency", type=_positive, help="calls in flight (default: the suite's, 16)"
    )
    run.add_argument(
        "--shard", type=_shard, help="run the i-th of N stable slices (by case id hash), e.g. 2/4"
    )
    run.add_argument(
        "--split",
        action="append",
        choices=["dev", "holdout", "regression"],
        help="splits to run (repeatable; default: dev and regression; a holdout read is "
        "recorded in the ledger)",
    )
    run.add_argument(
        "--cache",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="reuse cached replies (default: on when CI is set; always off with --repeats)",
    )
    run.add_argument("--batch", action="store_true", help=BATCH_HELP)
    run.add_argument("--show", type=int, default=10, help=SHOW_FAILED_HELP)
    run.set_defaults(func=cmd_run)

    noise = sub.add_parser(
        "noise", parents=[common], help="measure the noise floor: one prompt, R repeats"
    )
    noise.add_argument("version", help="prompt version")
    noise.add_argument("--repeats", type=_at_least_two, default=2, help="R >= 2 (default: 2)")
    noise.add_argument("--no-save", action="store_true", help="do not save the run")
    noise.add_argument("--concurrency", type=_positive, help="calls in flight")
    noise.add_argument("--batch", action="store_true", help=BATCH_HELP)
    noise.add_argument("--show", type=int, default=20, help="unstable cases listed")
    noise.set_defaults(func=cmd_noise, verbose=False)

    gate = sub.add_parser(
        "gate", parents=[common], help="decide pass / fail / inconclusive against a baseline"
    )
    gate.add_argument(
        "--baseline",
        required=True,
        help="baseline run (name, prefix, path), or a folder of run files, one per suite",
    )
    gate.add_argument(
        "--candidate",
        required=True,
        help="candidate run, a prompt version to run now, or a folder of run files (matched "
        "to the baseline's by suite name; one decision over every suite)",
    )
    gate.add_argument("--no-save", action="store_true", help="do not save a candidate run")
    gate.add_argument(
        "--early-stop",
        action="store_true",
        help="stop running the candidate once a fail is certain (anytime-valid sequential test)",
    )
    gate.add_argument("--show", type=int, default=20, help="cases listed per section")
    gate.add_argument(
        "--base-ref",
        metavar="REF",
        help="take the dev / holdout split from this git commit (the pull request's base), as "
        "the action does; a change of the holdout since then makes the verdict inconclusive",
    )
    gate.add_argument("--concurrency", type=_positive, help="calls in flight")
    gate.set_defaults(func=cmd_gate, verbose=False, cache=None)

    split = sub.add_parser(
        "split", parents=[common], help="dev / holdout / regression counts and leak checks"
    )
    split.add_argument("--apply", action="store_true", help="write the split into the case files")
    split.add_argument(
        "--show-holdout",
        action="store_true",
        help="name the holdout cases in leak findings (needs EVALGATE_HOLDOUT_KEY; counts only "
        "without it)",
    )
    split.set_defaults(func=cmd_split)

    holdout = sub.add_parser("holdout", parents=[common], help="the sealed holdout")
    hsub = holdout.add_subparsers(dest="holdout_command", required=True, metavar="ACTION")
    keygen_ = hsub.add_parser("keygen", parents=[common], help="make a key pair")
    keygen_.add_argument("--force", action="store_true", help="replace an existing public key")
    add = hsub.add_parser("add", parents=[common], help="seal cases with the public key")
    add.add_argument("file", help="JSONL file of new holdout cases")
    hsub.add_parser("list", parents=[common], help="count sealed cases (by category with the key)")
    retire = hsub.add_parser("retire", parents=[common], help="move leaked cases to regression")
    retire.add_argument("ids", nargs="+", help="case ids to retire")
    retire.add_argument("--to", default="regression.jsonl", help="plain case file to append to")
    holdout.set_defaults(func=cmd_holdout)

    release = sub.add_parser(
        "release", parents=[common], help="score dev and holdout, report the gap, gate the release"
    )
    release.add_argument("version", help="prompt version being released")
    release.add_argument("--name", help="release name (default: GITHUB_REF_NAME or the version)")
    release.add_argument("--no-save", action="store_true", help="do not save the run or record")
    release.add_argument("--concurrency", type=_positive, help="calls in flight")
    release.add_argument(
        "--force-reason", help="read the holdout past its budget; the reason goes in the ledger"
    )
    release.set_defaults(func=cmd_release, verbose=False, cache=False)

    audit_ = sub.add_parser(
        "audit", parents=[common], help="a searched prompt's held-out score beside its fitted one"
    )
    audit_.add_argument("candidate", help="the searched prompt version")
    audit_.add_argument("--baseline", required=True, help="the prompt version it replaces")
    audit_.add_argument("--fitted-score", type=float, help="the score the search reported")
    audit_.add_argument("--baseline-fitted-score", type=float, help="the baseline's tuning score")
    audit_.add_argument("--searched", type=_positive, help="how many candidates were tried")
    audit_.add_argument("--tuning-cases", type=_positive, help="cases the search selected on")
    audit_.add_argument(
        "--per-case-sd", type=float, help="per-case SD of scores (default: measured)"
    )
    audit_.add_argument(
        "--force-reason", help="read past the budget; the reason goes in the ledger"
    )
    audit_.add_argument("--concurrency", type=_positive, help="calls in flight")
    audit_.set_defaults(func=cmd_audit, verbose=False, cache=False)

    judge = sub.add_parser("judge", help="the judge scorer against human labels")
    jsub = judge.add_subparsers(dest="judge_command", required=True, metavar="ACTION")
    check = jsub.add_parser(
        "check",
        parents=[common],
        help="run the suite's judge over its labelled replies: agreement per split, the floor",
        description="Run the suite's judge over the replies in judge.labels and report, per "
        "split, agreement with the human verdicts: Cohen's kappa with its 95%% interval, Gwet's "
        "AC1, the confusion matrix, McNemar's test of the judge's lean, per-group agreement. "
        "Dev disagreements are listed; holdout labels are reported in aggregate and every read "
        "is recorded in the ledger. Exit 1 when the judge is below its floor "
        "(judge.min_labels, judge.min_kappa).",
    )
    check.add_argument(
        "--split",
        action="append",
        choices=["dev", "holdout"],
        help="splits to check (repeatable; default: both; tune a rubric on dev alone)",
    )
    check.add_argument(
        "--repeats",
        type=_positive,
        default=1,
        help="grade each reply K times and report the judge's flip rate (default: 1)",
    )
    check.add_argument(
        "--run", help="a saved run scored by this judge: its accuracy corrected for judge error"
    )
    check.add_argument(
        "--interval",
        choices=["bootstrap", "analytic"],
        help="kappa's 95%% interval: a seeded bootstrap over the labels' groups, or the "
        "large-sample analytic one (default: judge.interval; the gate wants judge.interval's)",
    )
    check.add_argument("--show", type=int, default=20, help="dev disagreements listed")
    check.add_argument("--no-save", action="store_true", help="do not save the check for the gate")
    check.add_argument(
        "--force-reason", help="read the holdout labels past the budget; the reason is kept"
    )
    check.add_argument("--concurrency", type=_positive, help="judge calls in flight")
    judge.set_defaults(func=cmd_judge)

    action_ = sub.add_parser(
        "action", help="the GitHub Action's entry point (inside its container)"
    )
    action_.set_defaults(func=cmd_action)

    baseline = sub.add_parser("baseline", help="baseline artefacts of the default branch")
    bsub = baseline.add_subparsers(dest="baseline_command", required=True, metavar="ACTION")
    pull = bsub.add_parser("pull", parents=[common], help="download the newest baseline artefact")
    pull.add_argument("--repo", required=True, help="OWNER/NAME")
    pull.add_argument("--artifact", default="evalgate-baseline", help="artefact name")
    pull.add_argument("--branch", help="default branch (default: the repository's)")
    pull.add_argument("--sha", help="prefer the baseline built at this commit (the merge base)")
    pull.add_argument("--out", default=".evalgate/baseline", help="folder to extract into")
    pull.set_defaults(func=cmd_baseline_pull)

    merge = sub.add_parser("merge", parents=[common], help="combine shard runs into one run")
    merge.add_argument("runs", nargs="+", help="the shard runs (names, prefixes or paths)")
    merge.add_argument("--output", help="write the merged run here instead of the runs folder")
    merge.add_argument("--show", type=int, default=10, help=SHOW_FAILED_HELP)
    merge.set_defaults(func=cmd_merge)

    init = sub.add_parser(
        "init",
        parents=[common],
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
        "--backend", choices=onboard.BACKENDS, help="the model backend (default: fake)"
    )
    init.add_argument("--model", metavar="NAME", help="the model name (default: per backend)")
    init.add_argument(
        "--scorer", choices=onboard.SCORERS, help="how replies are scored (default: label)"
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

    doctor_ = sub.add_parser(
        "doctor",
        parents=[common],
        help="check the setup: config, cases, split, workflow permissions and secrets",
        description="Check a repository's evalgate setup and say what to fix, one line per "
        "finding (ok, warn, FAIL). Exit 1 when anything FAILs. --config is relative to --dir.",
    )
    doctor_.add_argument("--dir", default=".", help="the repository's root (default: .)")
    doctor_.set_defaults(func=cmd_doctor)

    completion = sub.add_parser(
        "completion", parents=[common], help="print a bash completion script"
    )
    completion.set_defaults(func=cmd_completion)

    import_ = sub.add_parser(
        "import",
        parents=[common],
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

    lst = sub.add_parser("list", parents=[common], help="list saved runs")
    lst.set_defaults(func=cmd_list)

    report = sub.add_parser("report", parents=[common], help="print the report of a saved run")
    report.add_argument("run", help="run name, unique prefix, file path, or latest:VERSION")
    report.add_argument("--html", metavar="PATH", help=HTML_HELP)
    report.add_argument("--show", type=int, default=10, help=SHOW_FAILED_HELP)
    report.set_defaults(func=cmd_report)

    cmp_ = sub.add_parser("compare", parents=[common], help="pair two runs case by case")
    cmp_.add_argument("a", help="run A (the reference)")
    cmp_.add_argument("b", help="run B (the change)")
    cmp_.add_argument(
        "--show", type=int, default=20, help="cases listed per section (default: %(default)s)"
    )
    cmp_.add_argument("--html", metavar="PATH", help=HTML_HELP)
    cmp_.set_defaults(func=cmd_compare)
    return parser


def main(
    argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = wants_json(argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageExit as exc:
        if as_json:
            out.write(error_document(exc.message, kind="usage", exit_code=EXIT_USAGE))
        raise
    ctx = Context(args, out, err)
    try:
        code: int = args.func(ctx)
        return code
    except EvalgateError as exc:
        # One line, whatever the message quotes: no text of a case can start a workflow command.
        err.write(f"error: {escape(str(exc), 'log')}\n")
        if as_json:
            out.write(
                error_document(
                    str(exc),
                    kind=type(exc).__name__,
                    exit_code=exc.exit_code,
                    what=getattr(exc, "what", None),
                    where=getattr(exc, "where", None),
                    fix=getattr(exc, "fix", None),
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
