"""How two runs differ besides what is being compared: the one answer, for every reader.

The comparison report, the gate, the baseline a pull request finds and the comment each word
it for their reader, from the same :class:`Differences`. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from evalgate.runs.schema import Run


@dataclass(frozen=True)
class Differences:
    """What differs between run ``a`` and run ``b``, besides the prompt version."""

    # Both are of one prompt version whose text was edited between them: (sha a, sha b).
    prompt_edited: tuple[str, str] | None
    # The case files differ (or, for runs that name none, the cases' keyed digest); the case
    # files whose hashes differ, by name.
    cases_changed: bool
    case_files: tuple[str, ...]
    # Another backend or model: ("backend/name" of a, of b).
    model: tuple[str, str] | None
    # The same model with other settings (max_tokens, temperature, options).
    settings_changed: bool
    # Another scorer (its config, or the files it reads: a rubric, rules).
    scorer_changed: bool
    # Other tools answer the agent's calls (tools:, agent:, the tool command's files).
    tools_changed: bool
    # The sides ("A", "B") whose run is incomplete.
    incomplete: tuple[str, ...]


def differences(a: Run, b: Run) -> Differences:
    def model(run: Run) -> str:
        return f"{run.model.backend}/{run.model.name}"

    same_model = (a.model.backend, a.model.name) == (b.model.backend, b.model.name)
    settings = (a.model.max_tokens, a.model.temperature, a.model.options_sha256)
    changed = set(a.case_files.items()) ^ set(b.case_files.items())
    return Differences(
        prompt_edited=(
            (a.prompt.sha256, b.prompt.sha256)
            if a.prompt.name == b.prompt.name and a.prompt.sha256 != b.prompt.sha256
            else None
        ),
        # By the files where both runs name theirs: a run of part of the suite (--limit, a
        # shard, a release's dev and holdout) digests other cases from the same files.
        cases_changed=bool(changed)
        if a.case_files and b.case_files
        else a.cases_sha256 != b.cases_sha256,
        case_files=tuple(sorted({name for name, _ in changed})),
        model=None if same_model else (model(a), model(b)),
        settings_changed=same_model
        and settings != (b.model.max_tokens, b.model.temperature, b.model.options_sha256),
        scorer_changed=a.scorer_sha256 != b.scorer_sha256,
        tools_changed=a.tools_sha256 != b.tools_sha256,
        incomplete=tuple(side for run, side in ((a, "A"), (b, "B")) if run.incomplete),
    )
