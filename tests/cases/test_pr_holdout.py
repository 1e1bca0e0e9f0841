"""A pull request that tries to re-split the holdout, played as an attacker would.

The base commit (the GitHub stand-in's main) holds examples/bike-shop as shipped; each pull
request below edits its own evalgate.yml or case files to pull holdout cases into the light.
The suite runs on the real anthropic SDK against the Messages stand-in, so every message the
job sends is on record. Whatever the pull request says, the default branch's split decides:
no holdout case is sent, scored or shown, the comment says the pull request changes the
holdout, and the job fails.

Each attack is data (a name and an edit of the checkout), so more can be added.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_action import (
    FOLDER,
    REPO,
    Job,
    api,
    api_env,
    comments,
    edit_config,
    gh,
    holdout_cases,
    make_workspace,
    messages,
    pr_event,
    run_action,
    suite_of,
    use_anthropic,
)

from evalgate.cases.base_split import BaseSplit, hold_out, materialize, read_base
from evalgate.cases.gitrepo import GitTree
from evalgate.cases.read import load_cases
from evalgate.config.load import load_config
from tests.support.github_server import GitHubServer
from tests.support.messages_server import MessagesServer

__all__ = ["gh", "messages"]  # fixtures, imported to be used here

CASES = f"{FOLDER}/cases.jsonl"
CONFIG = f"{FOLDER}/evalgate.yml"
KEY = "sk-ant-test-key"


def _split(workspace: Path, **changes: Any) -> None:
    edit_config(workspace, lambda c: suite_of(c)["split"].update(changes))


def _write_split_on_holdout(workspace: Path, value: str) -> None:
    hidden = {case_id for case_id, _ in holdout_cases(workspace)}
    path = workspace / CASES
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["id"] in hidden:
            record["split"] = value
        out.append(json.dumps(record))
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


def _rename_everything(workspace: Path) -> None:
    """New ids, new groups and `split: dev` on every case, under a new suite name."""
    path = workspace / CASES
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        record = json.loads(line) | {"id": f"x{n}", "group": f"y{n}", "split": "dev"}
        out.append(json.dumps(record))
    path.write_text("\n".join(out) + "\n", encoding="utf-8")

    def rename(config: dict[str, Any]) -> None:
        config["suites"] = {"renamed": config["suites"].pop("bike-shop")}

    edit_config(workspace, rename)


def _paraphrase_holdout(workspace: Path) -> None:
    """Holdout messages lightly edited (one word appended), new ids, `split: dev`."""
    hidden = {case_id for case_id, _ in holdout_cases(workspace)}
    path = workspace / CASES
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["id"] in hidden:
            record |= {
                "id": "p-" + record["id"],
                "group": "p-" + record["group"],
                "split": "dev",
                "message": record["message"] + " Thanks!",
            }
        out.append(json.dumps(record))
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


def _copy_holdout(
    workspace: Path, disguise: Callable[[str], str], template: str | None = None
) -> list[str]:
    """Append a disguised copy of every holdout case (new id, new group, ``split: dev``),
    optionally with a template that undoes the disguise; returns the disguised messages."""
    hidden = {case_id for case_id, _ in holdout_cases(workspace)}
    path = workspace / CASES
    lines = path.read_text(encoding="utf-8").splitlines()
    planted = []
    for line in list(lines):
        record = json.loads(line)
        if record["id"] in hidden:
            message = disguise(record["message"])
            planted.append(message)
            copy = record | {"id": "c-" + record["id"], "group": "c-" + record["group"]}
            lines.append(json.dumps(copy | {"split": "dev", "message": message}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    if template is not None:
        edit_config(workspace, lambda c: suite_of(c).update(template=template))
    return planted


LOOKALIKE = str.maketrans("aeopcx", "аеорсх")  # Latin to Cyrillic letters that look the same


def _lax_second_suite(workspace: Path) -> list[str]:
    """A new suite over the same file, with the loosest copy check its own config can say,
    and copies with one word added."""
    planted = _copy_holdout(workspace, lambda m: "Hello! " + m)

    def add(config: dict[str, Any]) -> None:
        extra = json.loads(json.dumps(suite_of(config)))
        extra["split"].update(near_duplicate=1.0, shingle_words=10)
        config["suites"]["extra"] = extra

    edit_config(workspace, add)
    return planted


def _symlinked_config(workspace: Path) -> list[str]:
    """The config moved beside itself with every case on dev; evalgate.yml links to it."""
    config = workspace / CONFIG
    _split(workspace, holdout_fraction=0.0)
    moved = config.with_name("evalgate-pr.yml")
    config.rename(moved)
    config.symlink_to(moved.name)
    return []


ATTACKS: dict[str, Callable[[Path], list[str] | None]] = {
    "holdout_fraction 0": lambda w: _split(w, holdout_fraction=0.0),
    "a new salt": lambda w: _split(w, salt="every-case-to-dev-please"),
    "split: dev on holdout cases": lambda w: _write_split_on_holdout(w, "dev"),
    "holdout moved to regression": lambda w: _write_split_on_holdout(w, "regression"),
    "fields.split pointed elsewhere": lambda w: edit_config(
        w, lambda c: suite_of(c)["fields"].update(split="nothing-here")
    ),
    "suite renamed, ids and groups new": _rename_everything,
    "holdout paraphrased under new ids": _paraphrase_holdout,
    "copies in underscores, the template undoes them": lambda w: _copy_holdout(
        w,
        lambda m: m.replace(" ", "_"),
        "<message>\n{{ message|replace('_', ' ') }}\n</message>",
    ),
    "copies with words reversed, the template reverses them": lambda w: _copy_holdout(
        w,
        lambda m: " ".join(reversed(m.split(" "))),
        "<message>\n{{ message.split(' ')|reverse|join(' ') }}\n</message>",
    ),
    "copies in look-alike letters": lambda w: _copy_holdout(w, lambda m: m.translate(LOOKALIKE)),
    "copies with zero-width spaces": lambda w: _copy_holdout(
        w, lambda m: m.replace(" ", " \u200b").replace("e", "e\u200b")
    ),
    "a new suite with a lax copy check": _lax_second_suite,
    "symlinked config": _symlinked_config,
}


def _pr(
    tmp_path: Path, gh: GitHubServer, messages: MessagesServer, attack: str
) -> tuple[Job, list[str]]:
    workspace = make_workspace(tmp_path)
    use_anthropic(workspace)
    planted = ATTACKS[attack](workspace) or []
    changed = {p: (workspace / p).read_text(encoding="utf-8") for p in (CONFIG, CASES)}
    gh.create_branch(REPO, "feature")
    gh.add_commit(REPO, changed, branch="feature")
    gh.add_pull(REPO, head="feature", number=7)
    event = pr_event()
    event["pull_request"]["base"]["sha"] = gh.branch_sha(REPO, "main")
    job = run_action(
        workspace,
        "pull_request",
        event,
        ref="refs/pull/7/merge",
        inputs=api(gh) | {"anthropic_api_key": KEY},
        env=api_env(gh) | {"ANTHROPIC_BASE_URL": messages.url},
    )
    return job, planted


def _sent(messages: MessagesServer) -> list[str]:
    return [
        json.dumps(ex.body, ensure_ascii=False)
        for ex in messages.requests
        if ex.path.endswith("/messages")
    ]


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_pull_request_that_re_splits_sends_and_shows_no_holdout_case(
    tmp_path: Path, gh: GitHubServer, messages: MessagesServer, attack: str
) -> None:
    hidden = holdout_cases(make_workspace(tmp_path / "base"))
    assert len(hidden) > 40
    job, planted = _pr(tmp_path, gh, messages, attack)

    sent = _sent(messages)
    if attack == "symlinked config":
        # Which file the base's split is read from would be the head's choice: nothing runs.
        assert sent == [] and "symbolic link" in job.summary
        assert job.outputs["verdict"] == "inconclusive"
        return
    # The dev cases were run (the job did its work on the default branch's split) ...
    assert len(sent) > 100, job.out + job.err
    # ... and not one holdout message was sent, as written or as planted in disguise.
    leaked = [
        m
        for m in [json.dumps(m, ensure_ascii=False)[1:-1] for _, m in hidden] + planted
        for body in sent
        if m in body
    ]
    assert leaked == []
    public = [job.summary, job.out, job.err, *comments(gh)]
    for case_id, message in hidden:
        for text in public:
            assert not re.search(rf"\b{re.escape(case_id)}\b", text), (attack, case_id)
            assert message not in text, (attack, message)
    # The comment and the job say what happened, and the job fails.
    posted = comments(gh)
    assert posted
    for comment in posted:  # one a suite
        assert "this pull request changes the holdout" in comment
        assert "decided on the default branch" in comment
    assert job.outputs["verdict"] == "inconclusive"
    assert job.code == 1
    assert any("changes the holdout" in a for a in job.annotations("error"))


def test_a_pull_request_that_keeps_the_split_is_not_flagged(
    tmp_path: Path, gh: GitHubServer, messages: MessagesServer
) -> None:
    job, _ = _pr(tmp_path, gh, messages, "holdout_fraction 0")  # warm-up: the flagged path
    assert job.code == 1
    # The same repository, a pull request that only switches the model: no holdout change.
    messages.reset()
    workspace = make_workspace(tmp_path / "plain")
    use_anthropic(workspace)
    event = pr_event(9)
    event["pull_request"]["base"]["sha"] = gh.branch_sha(REPO, "main")
    gh.create_branch(REPO, "plain")
    gh.add_commit(REPO, {CONFIG: (workspace / CONFIG).read_text()}, branch="plain")
    gh.add_pull(REPO, head="plain", number=9)
    job = run_action(
        workspace,
        "pull_request",
        event,
        ref="refs/pull/9/merge",
        inputs=api(gh) | {"anthropic_api_key": KEY},
        env=api_env(gh) | {"ANTHROPIC_BASE_URL": messages.url},
    )
    assert "changes the holdout" not in job.summary
    assert job.outputs["verdict"] != "inconclusive" or "holdout" not in job.summary
    # The comment's command reproduces the job locally on the same base commit's split.
    base = event["pull_request"]["base"]["sha"]
    assert any(f"--base-ref {base}" in body for body in comments(gh, 9))
    assert not any("changes the holdout" in a for a in job.annotations("error"))


def test_an_unreadable_base_runs_nothing_and_is_inconclusive(
    tmp_path: Path, messages: MessagesServer
) -> None:
    """A shallow checkout and no token: the base's split cannot be read, so nothing is sent
    (not even dev cases: which are dev is the base's to say)."""
    workspace = make_workspace(tmp_path)
    use_anthropic(workspace)
    _split(workspace, holdout_fraction=0.0)
    event = pr_event()
    event["pull_request"]["base"]["sha"] = "0" * 40
    job = run_action(
        workspace,
        "pull_request",
        event,
        ref="refs/pull/7/merge",
        inputs={"anthropic_api_key": KEY},
        env={"ANTHROPIC_BASE_URL": messages.url},
    )
    assert messages.requests == []
    assert job.code == 0  # inconclusive, and fail_on is ["fail"] by default
    assert job.outputs["verdict"] == "inconclusive"
    assert "nothing was run" in job.summary
    assert "0000000000" in job.summary and "github\\_token" in job.summary
    [warning] = [a for a in job.annotations("warning") if "INCONCLUSIVE" in a]
    assert "nothing was run" in warning


# --- the same rule through git, as a local `--base-ref` or a checkout that has the base --------


def _git(repo: Path, *argv: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *argv], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository whose main commit holds the example; the work tree is the base."""
    root = make_workspace(tmp_path)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "-c", "user.email=t@example.com", "-c", "user.name=t", "add", "-A")
    _git(root, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "base")
    return root


def _base(repo: Path, ref: str, tmp_path: Path) -> BaseSplit:
    return read_base(materialize(GitTree.open(repo, ref, fetch=False), CONFIG, tmp_path / "copy"))


def test_git_base_split_matches_the_base_files_exactly(repo: Path, tmp_path: Path) -> None:
    base = _base(repo, "main", tmp_path)
    hidden = {case_id for case_id, _ in holdout_cases(repo)}
    assert {c.id for c in base.holdout} == hidden
    # The head re-splits everything to dev; the base's split is applied all the same.
    _split(repo, holdout_fraction=0.0)
    loaded = load_config(repo / CONFIG)
    _, suite = loaded.suite(None)
    plain = load_cases(loaded.expand(suite.cases, "case"), suite.fields, root=loaded.root)
    cases, change = hold_out(base, "bike-shop", suite, plain.cases, loaded.root)
    assert {c.id for c in cases if c.split == "holdout"} == hidden
    assert (
        change.changed
        and change.moved == len(hidden)
        and change.policy == ["split.holdout_fraction"]
    )


def test_new_cases_follow_the_base_policy_and_grow_nothing(repo: Path, tmp_path: Path) -> None:
    base = _base(repo, "main", tmp_path)
    loaded = load_config(repo / CONFIG)
    _, suite = loaded.suite(None)
    plain = load_cases(loaded.expand(suite.cases, "case"), suite.fields, root=loaded.root)
    extra = plain.cases[0].model_copy(
        update={"id": "new-1", "group": "brand-new-group", "input": {"message": "A new one?"}}
    )
    cases, change = hold_out(base, "bike-shop", suite, (*plain.cases, extra), loaded.root)
    assert not change.changed
    new = next(c for c in cases if c.id == "new-1")
    # Independent: the base's hashed side of the group, under the base's salt and fraction.
    from evalgate.cases.split import hashed_side

    assert new.split == hashed_side("brand-new-group", suite.split)


def test_a_local_gate_with_base_ref_uses_the_base_split(
    repo: Path, cli: Callable[..., Any], messages: MessagesServer
) -> None:
    """`evalgate gate --base-ref main`: the head's holdout_fraction 0 is overruled locally too."""
    hidden = {case_id for case_id, _ in holdout_cases(repo)}
    config = str(repo / CONFIG)
    code, _, err = cli("run", "v2", "--config", config)  # the baseline, on the base's split
    assert code == 0, err
    _split(repo, holdout_fraction=0.0)
    code, out, err = cli(
        "gate",
        "--baseline",
        "latest:v2",
        "--candidate",
        "v3",
        "--config",
        config,
        "--base-ref",
        "main",
        "--format",
        "json",
    )
    verdict = json.loads(out)
    assert verdict["kind"] == "inconclusive", err
    assert "this pull request changes the holdout" in verdict["reasons"][0]
    assert hidden and not hidden & set(out.split('"'))


def test_a_pull_request_that_trims_the_sealed_file_changes_the_holdout(
    repo: Path, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    from test_release import seal_the_holdout

    seal_the_holdout(cli, repo / FOLDER)
    _git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "add", "-A")
    _git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "seal")
    base = _base(repo, "HEAD", tmp_path)
    sealed = repo / FOLDER / "holdout.sealed.jsonl"
    lines = sealed.read_text().splitlines()
    loaded = load_config(repo / CONFIG)
    _, suite = loaded.suite(None)
    plain = load_cases(loaded.expand(suite.cases, "case"), suite.fields, root=loaded.root)

    # Adding sealed cases (anyone may, with the public key) is not a change of the holdout.
    sealed.write_text("\n".join([*lines, lines[0].replace('"v": 1', '"v": 1 ')]) + "\n")
    _, grown = hold_out(base, "bike-shop", suite, plain.cases, loaded.root)
    assert not grown.changed
    # Removing some is.
    sealed.write_text("\n".join(lines[:10]) + "\n")
    _, trimmed = hold_out(base, "bike-shop", suite, plain.cases, loaded.root)
    assert trimmed.changed and trimmed.sealed_removed == len(lines) - 10
    assert f"{len(lines) - 10} sealed cases removed or altered" in trimmed.line()
