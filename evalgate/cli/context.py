"""What every command shares: the context read once from argv and the environment, and how it
turns into the service's world and run options (``evalgate.app``)."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

# Set before anything imports pydantic (this is the CLI's first module of evalgate's own):
# evalgate's models need no pydantic plugins (they instrument validation), and looking them up
# reads every installed distribution's entry points, 15 ms of every command's start-up. A user
# who sets the variable keeps their own value.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from evalgate.report import template_cache
from evalgate.report.escape import Printed, escape, printed
from evalgate.report.terminal import colourise, wants_colour

if TYPE_CHECKING:
    # The service (evalgate.app) imports the runner, the backends and the holdout's
    # cryptography: a command that only reads run files (gate, report, compare) never does.
    from evalgate.app import RunOptions, World
    from evalgate.backends.base import Backend
    from evalgate.cases.holdout import SecretKey
    from evalgate.config.load import LoadedConfig
    from evalgate.config.models import ModelSettings, Suite
    from evalgate.runs.schema import Run

__all__ = [
    "EXIT_CODES",
    "EXIT_GATE_FAILED",
    "EXIT_INCOMPLETE",
    "EXIT_OK",
    "EXIT_USAGE",
    "Context",
    "price_as_for",
]

EXIT_OK, EXIT_GATE_FAILED, EXIT_USAGE = 0, 1, 2
# A run whose errored share exceeds max_error_share (or that was interrupted): its report is
# printed and it is saved, but a script must not take its numbers for a measurement.
EXIT_INCOMPLETE = 3
EXIT_CODES = (
    (EXIT_OK, "ok (a passing gate; an inconclusive one too, unless `gate.inconclusive_exit: 1`)"),
    (
        EXIT_GATE_FAILED,
        "a failed gate (`gate`, `release`, the action per `fail_on`), a leak found by `split`, "
        "or a `doctor` finding to fix",
    ),
    (
        EXIT_USAGE,
        "a usage or input error: one line saying what, where and how to fix it, no traceback "
        "(with `--json`, a JSON object on stdout)",
    ),
    (
        EXIT_INCOMPLETE,
        "an incomplete run (`run`, `report`, `merge`): more cases errored than "
        "`max_error_share` allows (the report lists the errors), or the run was interrupted or "
        "stopped by its budget (the report counts the cases not run, which `evalgate run "
        "VERSION --resume RUN` sends)",
    ),
)


def price_as_for(loaded: LoadedConfig, run: Run) -> str | None:
    """The model whose prices a run's cost is reckoned at (its suite's ``price_as``)."""
    suite = loaded.config.suites.get(run.suite)
    return suite.price_as if suite else None


class Context:
    """What every command receives: parsed args, streams, and the environment, read once here."""

    def __init__(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
        self.args = args
        self.out = out
        self.err = err
        self.env = dict(os.environ)

    @property
    def env(self) -> dict[str, str]:
        return self._env

    @env.setter
    def env(self, value: dict[str, str]) -> None:
        # The secrets among them are kept out of every error text printed or saved.
        from evalgate.redact import hold_environment

        hold_environment(value)
        self._env = value
        # Where compiled report templates are kept between commands (EVALGATE_TEMPLATE_CACHE).
        template_cache.configure(value)

    def config(self) -> LoadedConfig:
        from evalgate.config.load import load_config

        return load_config(Path(self.args.config))

    @property
    def form(self) -> Printed:
        """The command's --format (text when it has none)."""
        chosen = getattr(self.args, "format", "text")
        return "json" if chosen == "json" else "markdown" if chosen == "markdown" else "text"

    def print(self, text: str = "") -> None:
        """A line (or lines) of the command's output, in its --format (see write)."""
        form = self.form
        text = printed(text if text.endswith("\n") else text + "\n", form)
        if form == "text" and wants_colour(self.out, self.env):
            text = colourise(text)
        self.out.write(text)

    def write(self, text: str, form: Printed | None = None, *, err: bool = False) -> None:
        """Text as it is (no newline added) to standard output, or to standard error with
        ``err``: every write of a command passes here or print, so none carries a workflow
        command or an escape sequence from what it quotes (escape.printed). ``form``: what the
        text is, when not the command's --format (JSONL on stdout is ``json``)."""
        if err:
            self.err.write(printed(text, "stream"))
        else:
            self.out.write(printed(text, form or self.form))

    def warn(self, text: str) -> None:
        # One line, whatever it quotes (a case's text, an importer's note): no workflow command.
        line = f"warning: {escape(text, 'log')}"
        self.err.write((colourise(line) if wants_colour(self.err, self.env) else line) + "\n")

    def world(self) -> World:
        from evalgate.app import World

        return World(env=self.env, err=self.err, warn=self.warn, say=self.print)

    def run_options(self, **overrides: Any) -> RunOptions:
        """The run options of this command's flags (those it has), with ``overrides``."""
        from evalgate.app import RunOptions

        args = self.args
        files = overrides.pop("case_files", None)
        options = RunOptions(
            concurrency=getattr(args, "concurrency", None),
            verbose=bool(getattr(args, "verbose", False)),
            cache=getattr(args, "cache", None),
            batch=bool(getattr(args, "batch", False)),
            force_reason=getattr(args, "force_reason", None),
            case_files=tuple(files) if files is not None else None,
            # --no-save writes nothing into the state folder: no journal either.
            journal=not getattr(args, "no_save", False),
        )
        return replace(options, **overrides)

    def run_version(self, loaded: LoadedConfig, suite: str, version: str, **overrides: Any) -> Run:
        """Run one prompt version of a suite with this command's flags (see ``RunOptions``)."""
        from evalgate.app import run_version

        return run_version(self.world(), loaded, suite, version, self.run_options(**overrides))

    def backend(self, loaded: LoadedConfig, settings: ModelSettings) -> Backend:
        from evalgate.app import build_backend

        return build_backend(self.env, loaded, settings)

    def holdout_secret(self, suite: Suite) -> SecretKey | None:
        from evalgate.app import holdout_secret

        return holdout_secret(self.env, suite)
