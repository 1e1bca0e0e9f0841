"""Hostile input against the sealed history's last anchor: someone who can write the data
branch and the default branch deletes or rolls back the history, the read ledger and the
change ledger's anchors together (issue 23, item 3: "once any release of the repository was
sealed, a missing ledger or history is a failure, not a first release").

What is left is the check run each release job made on its tag's commit: GitHub's REST API
cannot delete one. Each attack is data, beside the outcome that must follow; releases run as
the action on a tag push against the GitHub stand-in.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from evalgate.cases.holdout import ANCHOR_PREFIX, HoldoutKey, load_secret_key, release_anchor
from tests.action.test_action import DATA_BRANCH, FOLDER, REPO, SUITE
from tests.test_hostile_history import CHANGES, Repo, _history, sealed_repo

__all__ = ["sealed_repo"]

CHECK = f"evalgate release: {SUITE}"


def release_on_new_commit(repo: Repo, tag: str) -> str:
    """A commit on main, then the release of ``tag`` on it; the tag's commit. (The job then
    commits its anchor to main, so main moves on past the tag.)"""
    sha = repo.gh.add_commit(REPO, {"NOTES.md": f"release {tag}\n"}).sha
    job = repo.release(tag)
    assert job.code == 0, job.out + job.err
    assert repo.gh.repo(REPO).tags[tag] == sha
    return sha


def delete_history(repo: Repo) -> dict[str, str | None]:
    return {"releases.json": None}


def rollback(repo: Repo) -> dict[str, str | None]:
    """The last record taken off the end: the chain alone cannot show it."""
    return {"releases.json": json.dumps(_history(repo)[:-1])}


# (the attack on the data branch, what the refusal says after the check run's name). The read
# ledger and the default branch's anchors are deleted with it every time.
GONE = "anchors release 'v2' as release 2, but the release history has no signed release"
CUT = "anchors release 'v2' as release 2, but the release history ends at release 1"
ERASED = [(delete_history, GONE), (rollback, CUT)]


@pytest.mark.parametrize(("attack", "refusal"), ERASED, ids=[a.__name__ for a, _ in ERASED])
def test_history_ledger_and_anchors_erased_together_fail_on_the_tags_check_run(
    sealed_repo: Repo, attack: Callable[[Repo], dict[str, str | None]], refusal: str
) -> None:
    repo = sealed_repo
    release_on_new_commit(repo, "v1")
    release_on_new_commit(repo, "v2")
    # Every trace a data-branch and default-branch writer can reach.
    files = attack(repo)
    files["holdout-ledger.jsonl"] = None
    repo.write(files)
    repo.gh.add_commit(REPO, {f"{FOLDER}/{CHANGES}": None})
    assert repo.gh.file(REPO, f"{FOLDER}/{CHANGES}", ref="main") is None
    tampered = repo.data("releases.json")

    repo.gh.add_commit(REPO, {"NOTES.md": "release v3\n"})
    job = repo.release("v3")
    assert job.code == 2, job.out + job.err
    assert job.outputs.get("verdict") != "pass"
    [error] = job.annotations("error")
    assert f"the check run '{CHECK}' on tag v2" in error, error
    assert refusal in error, error
    assert "data branch's git history" in error
    # Nothing was written over what is left, and no check run claims v3 was released.
    assert repo.data("releases.json") == tampered
    assert [c.name for c in repo.gh.check_runs(REPO)].count(CHECK) == 2


def test_each_release_check_run_carries_its_signed_anchor(sealed_repo: Repo) -> None:
    repo = sealed_repo
    first = release_on_new_commit(repo, "v1")
    second = release_on_new_commit(repo, "v2")
    key = HoldoutKey(load_secret_key(repo.secret))
    records = _history(repo)
    runs = [c for c in repo.gh.check_runs(REPO) if c.name == CHECK]
    assert [c.head_sha for c in runs] == [first, second]
    for run, record in zip(runs, records, strict=True):
        [line] = [x for x in (run.text or "").splitlines() if x.startswith(ANCHOR_PREFIX)]
        anchor = json.loads(line.removeprefix(ANCHOR_PREFIX))
        assert (anchor["release"], anchor["seq"], anchor["record"]) == (
            record["name"],
            record["seq"],
            record["mac"],
        )
        # The same signed line the change ledger gets, and nothing of any case.
        assert key.verify(
            release_anchor(
                datetime.fromisoformat(anchor["time"]),
                anchor["release"],
                anchor["seq"],
                anchor["record"],
                anchor["after"],
                key,
            ).body(),
            anchor["mac"],
        )
        assert set(anchor) == {"v", "time", "change", "count", "lines", "after", "release"} | {
            "seq",
            "record",
            "mac",
        }


def planted(repo: Repo, signer: str) -> str:
    """An anchor line for a release 9 the history never had, signed by ``signer``."""
    secret = repo.secret if signer == "the holdout key" else None
    key = HoldoutKey(load_secret_key(secret) if secret else None)
    if signer == "another key":
        from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

        key = HoldoutKey(X25519PrivateKey.generate())
    anchor = release_anchor(datetime.now(UTC), "v9", 9, "A" * 43, 0, key)
    return ANCHOR_PREFIX + anchor.model_dump_json()


# (who made the check run, who signed its anchor line, the warning the release gives, or None)
FORGED = [
    ("pr-bot", "the holdout key", None),  # another app's check run is not read at all
    ("github-actions", "another key", "not signed by this holdout key"),
    ("github-actions", "no key", "not signed by this holdout key"),
]


@pytest.mark.parametrize(
    ("app", "signer", "warning"), FORGED, ids=[f"{a} signed with {s}" for a, s, _ in FORGED]
)
def test_a_planted_check_run_is_no_anchor(
    sealed_repo: Repo, app: str, signer: str, warning: str | None
) -> None:
    repo = sealed_repo
    release_on_new_commit(repo, "v1")
    second = release_on_new_commit(repo, "v2")
    repo.gh.add_check_run(REPO, second, CHECK, app=app, title="PASS", text=planted(repo, signer))

    repo.gh.add_commit(REPO, {"NOTES.md": "release v3\n"})
    job = repo.release("v3")
    assert job.code == 0, job.out + job.err
    assert [(r["name"], r["seq"]) for r in _history(repo)] == [("v1", 1), ("v2", 2), ("v3", 3)]
    said = [w for w in job.annotations("warning") if "release anchor not signed" in w]
    if warning is None:
        assert said == []
    else:
        [line] = said
        assert warning in line and "on tag v2" in line


def test_a_first_release_after_tags_without_evalgate_check_runs_passes(sealed_repo: Repo) -> None:
    repo = sealed_repo
    # Earlier tags from before evalgate: one with another workflow's check run, one bare, one
    # that is not a release tag at all.
    for tag in ("v0.9", "v0.10", "nightly"):
        repo.gh.add_commit(REPO, {"NOTES.md": f"{tag}\n"})
        repo.gh.add_tag(REPO, tag)
    sha = repo.gh.branch_sha(REPO, "main")
    assert sha is not None
    repo.gh.add_check_run(REPO, sha, "ci", text="all green")

    repo.gh.add_commit(REPO, {"NOTES.md": "release v1\n"})
    job = repo.release("v1")
    assert job.code == 0, job.out + job.err
    assert [(r["name"], r["seq"]) for r in _history(repo)] == [("v1", 1)]
    assert repo.gh.file(REPO, f"evalgate/{SUITE}/releases.json", ref=DATA_BRANCH) is not None
    # The release tags' commits were read (v0.9 and v0.10, then v1's own), the other not.
    read = repo.gh.find_requests("GET", f"/repos/{REPO}/commits/*/check-runs")
    assert len(read) == 3
    assert all(r.query.get("check_name") == [CHECK] for r in read)
