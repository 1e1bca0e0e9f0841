"""Which mode an event asks for, and which suites it runs: pure functions of the event."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

from evalgate.action.inputs import Inputs, Mode
from evalgate.config.load import LoadedConfig
from evalgate.config.models import Suite
from evalgate.errors import UserError


def detect_mode(inputs: Inputs, env: Mapping[str, str], event: dict[str, Any], tags: str) -> Mode:
    """The mode from the event: pull_request -> pr; a pull request closed without merging ->
    closed (what its jobs spent is kept; a merged one is counted by its merge commit's baseline
    job); a push of a release tag -> release; a push to the default branch or a schedule ->
    baseline; workflow_dispatch -> the ``mode`` input."""
    if inputs.mode != "auto":
        return inputs.mode
    name = env.get("GITHUB_EVENT_NAME", "")
    ref = env.get("GITHUB_REF", "")
    if name in ("pull_request", "pull_request_target"):
        if event.get("action") == "closed":
            return "skip" if (event.get("pull_request") or {}).get("merged") else "closed"
        return "pr"
    if name == "push" and ref.startswith("refs/tags/"):
        tag = ref.removeprefix("refs/tags/")
        if fnmatch.fnmatchcase(tag, tags):
            return "release"
        raise UserError(
            f"tag {tag!r} does not match the config's release_tags {tags!r}",
            fix="set release_tags in evalgate.yml, or mode: in the workflow",
        )
    if name == "push":
        # Only the default branch's baseline is ever used: one made elsewhere is money spent.
        branch = ref.removeprefix("refs/heads/")
        default = str((event.get("repository") or {}).get("default_branch") or "main")
        if branch != default:
            # Not an error: a workflow may run on every push; there is just nothing to do.
            return "skip"
        return "baseline"
    if name == "schedule":
        return "baseline"
    if name == "workflow_run":
        return "fork"
    raise UserError(
        f"cannot choose a mode for the event {name!r}",
        fix="set the mode input (pr, baseline or release)",
    )


def suites_to_run(loaded: LoadedConfig, wanted: str) -> list[tuple[str, Suite]]:
    if wanted == "all":
        return list(loaded.config.suites.items())
    names = [n.strip() for n in wanted.split(",") if n.strip()]
    return [loaded.suite(n) for n in names]


def skip_reason(env: Mapping[str, str], event: dict[str, Any], default_branch: str) -> str:
    """Why an event the workflow runs on has nothing for evalgate to do (the job's log line)."""
    if event.get("action") == "closed":
        pull = event.get("pull_request") or {}
        if not pull.get("merged"):
            return f"nothing to do for pull request #{pull.get('number')}, closed"
        return (
            f"nothing to do for pull request #{pull.get('number')}, merged: the baseline job "
            "of its merge commit keeps what its jobs spent"
        )
    ref = env.get("GITHUB_REF", "")
    return (
        f"nothing to do for a push to {ref}: baselines are made only from the default "
        f"branch ({default_branch}); limit the workflow's push trigger to it"
    )
