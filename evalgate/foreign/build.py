"""What every foreign reader shares: a foreign result file's cases and their repeats made into
evalgate's own run model, so the gate, the report and the comment read it as they read a run.

A reader gives each case an id (its test identity), its inputs and expected answer as the file
has them, the hash of what defines it (inputs, expected, its checks) and one outcome per repeat
(score 1 or 0 by the harness's own pass, or an error). The run's provenance says what the
harness ran: the model (``backend`` is the harness), the prompt (its text's hash), the scorer
(its configuration's hash), so another model or prompt is reported and another scorer makes
the gate inconclusive, as for evalgate's own runs.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evalgate import __version__
from evalgate.errors import RunFileError
from evalgate.runs.schema import CaseResult, ModelInfo, Outcome, PromptInfo, Run


def digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def passed(ok: bool, answer: str | None = None, reason: str | None = None) -> Outcome:
    return Outcome(score=1.0 if ok else 0.0, format_ok=True, answer=answer, reason=reason)


def errored(message: str, answer: str | None = None) -> Outcome:
    return Outcome(error=message[:500], error_kind="harness", answer=answer)


@dataclass
class ForeignCase:
    id: str
    input: dict[str, Any]
    expected: Any
    hash: str
    outcomes: list[Outcome] = field(default_factory=list)
    category: str | None = None


@dataclass
class ForeignRun:
    """A foreign result file, read: its provenance and its cases in file order."""

    format: str
    path: Path
    suite: str
    model: str
    model_settings: Any
    prompt_name: str
    prompt_text: Any
    scorer: dict[str, Any]
    created_at: datetime | None = None
    cases: dict[str, ForeignCase] = field(default_factory=dict)
    interrupted: bool = False
    # Records left out, by reason (a case that cannot be paired is counted, never dropped
    # silently).
    dropped: dict[str, int] = field(default_factory=dict)
    # The identities of records left out that have one (a skipped test): not "missing" from
    # the other side's pairing, which counts them apart.
    left_out: set[str] = field(default_factory=set)
    # What the reader had to decide that the gate says (one line each).
    notes: list[str] = field(default_factory=list)

    def add(self, case: ForeignCase, outcome: Outcome) -> None:
        """One repeat of a case; a case seen again with other content is an error."""
        known = self.cases.get(case.id)
        if known is None:
            case.outcomes = [outcome]
            self.cases[case.id] = case
        elif known.hash != case.hash:
            raise RunFileError(
                f"two results share the test identity {case.id!r} with different tests",
                where=str(self.path),
                fix="give the tests different descriptions or vars",
            )
        else:
            known.outcomes.append(outcome)

    def drop(self, reason: str, ident: str | None = None) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1
        if ident is not None:
            self.left_out.add(ident)

    def run(self) -> Run:
        if not self.cases:
            raise RunFileError(
                f"no results to gate in this {self.format} file"
                + (f" (left out: {self.dropped_line()})" if self.dropped else ""),
                where=str(self.path),
                fix="pass the output of a finished run",
            )
        cases = [
            CaseResult(
                id=c.id,
                input=c.input,
                expected=c.expected,
                hash=c.hash,
                category=c.category,
                outcomes=c.outcomes,
            )
            for c in self.cases.values()
        ]
        repeats = max(len(c.outcomes) for c in cases)
        return Run(
            name=f"{self.format}-{self.path.stem}",
            created_at=self.created_at or datetime.fromtimestamp(self.path.stat().st_mtime, UTC),
            suite=self.suite,
            prompt=PromptInfo(name=self.prompt_name, sha256=digest(self.prompt_text)),
            cases_sha256=digest(sorted((c.id, c.hash) for c in cases)),
            case_files={self.path.name: digest([c.hash for c in cases])},
            model=ModelInfo(
                backend=self.format,
                name=self.model,
                max_tokens=0,
                temperature=None,
                options_sha256=digest(self.model_settings),
            ),
            scorer=self.scorer,
            scorer_sha256=digest(self.scorer),
            evalgate_version=__version__,
            repeats=repeats,
            interrupted=self.interrupted,
            cases=cases,
        )

    def dropped_line(self) -> str:
        return ", ".join(f"{why} ({n:,})" for why, n in self.dropped.items())


def load_json(path: Path, data: bytes, what: str) -> Any:
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunFileError(
            f"{what} is not complete JSON ({exc}): the file is truncated or not {what}",
            where=str(path),
            fix="pass the whole file the harness wrote (download it again if it was cut)",
        ) from None
    except (ValueError, RecursionError) as exc:
        raise RunFileError(f"{what} cannot be read: {exc}"[:300], where=str(path)) from None
