"""Hostile input against the sealed history: replays of retired lines and of a tag's record, a
renamed suite, someone with write access to the data branch, and what public records say of
holdout groups (issue 23, item 3).

Each attack is data: how the repository (or the data branch) is changed, and the outcome that
must follow. Releases run the way users run them: `evalgate release` in-process, and the action
on a tag push against the GitHub stand-in.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import EXAMPLE, CliResult, copy_example
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from evalgate.analysis.history import check_chain, next_link
from evalgate.analysis.release import ReleaseRecord, Score, sign_record
from evalgate.analysis.summary import Rate
from evalgate.cases.holdout import (
    HoldoutKey,
    LedgerRecord,
    SealedChange,
    line_digest,
    load_secret_key,
)
from evalgate.config.load import load_config
from evalgate.errors import UserError
from evalgate.running.suite import load_suite_cases
from evalgate.runs.schema import PromptInfo
from tests.action.test_action import (
    DATA_BRANCH,
    FOLDER,
    HARMLESS,
    PROMPT,
    REPO,
    SUITE,
    Job,
    api,
    api_env,
    example_tree,
    open_pull,
    pr_event,
    push_event,
    run_action,
)
from tests.support.github_server import GitHubServer

KEY = "EVALGATE_HOLDOUT_KEY"
STORE = "holdout.sealed.jsonl"
CHANGES = "holdout.changes.jsonl"


def seal(cli: Callable[..., CliResult], root: Path) -> str:
    """Move the example's holdout cases into a sealed store at ``root``; the secret key."""
    config = root / "evalgate.yml"
    data = yaml.safe_load(config.read_text())
    data["suites"][SUITE]["sealed_holdout"] = {"file": STORE, "public_key": "holdout.pub"}
    config.write_text(yaml.safe_dump(data))
    code, out, _ = cli("holdout", "keygen", "--config", str(config))
    assert code == 0
    loaded = load_config(config)
    cases = load_suite_cases(loaded, loaded.suite(None)[1]).cases
    held = {c.source.rsplit(":", 1)[1] for c in cases if c.split == "holdout"}
    lines = (root / "cases.jsonl").read_text().split("\n")
    (root / "cases.jsonl").write_text(
        "\n".join(x for n, x in enumerate(lines, start=1) if str(n) not in held)
    )
    new = root / "new-holdout.jsonl"
    new.write_text("\n".join(x for n, x in enumerate(lines, start=1) if str(n) in held) + "\n")
    code, _, err = cli("holdout", "add", str(new), "--config", str(config))
    assert code == 0, err
    new.unlink()
    return out.strip().splitlines()[-1]


def release(
    cli: Callable[..., CliResult], root: Path, name: str, secret: str, *extra: str
) -> tuple[int, dict[str, Any], str]:
    options = ("--config", str(root / "evalgate.yml"), "--name", name, "--format", "json")
    code, out, err = cli("release", "v3", *options, *extra, env={KEY: secret})
    return code, json.loads(out) if out else {}, err


def store_lines(root: Path) -> list[str]:
    return (root / STORE).read_text().splitlines()


def write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines))


# --- 1. history replays, through `evalgate release` --------------------------------------------


RETURNED = (
    "2 sealed holdout lines that a signed `evalgate holdout retire` retired are back in the "
    "sealed file: remove them and restore their regression copies (a retired case returns "
    "only through `evalgate holdout add` run with the holdout key)"
)


def readd(lines: list[str], key: HoldoutKey | None) -> dict[str, Any]:
    """An add record for ``lines``, as `holdout add` writes it (signed when ``key``)."""
    add = SealedChange(
        time=datetime.now(UTC),
        change="add",
        count=len(lines),
        lines=[line_digest(x) for x in lines],
        after=0,
    )
    if key is not None:
        add = add.model_copy(update={"mac": key.sign(add.body())})
    return json.loads(add.model_dump_json())


# (what goes in the change ledger beside the re-appended lines, the reasons the release gives)
RETIRED_RETURNS = [
    ("nothing", [RETURNED]),
    ("an add record without the key", [RETURNED]),
    ("an add record signed with another key", [RETURNED]),
    ("an add record signed with the key", None),  # the key holder's own re-add: it passes
]


@pytest.mark.parametrize(
    ("ledger", "reasons"), RETIRED_RETURNS, ids=[r[0] for r in RETIRED_RETURNS]
)
def test_retired_lines_appended_again_fail_the_next_release(
    cli: Callable[..., CliResult], bike_shop: Path, ledger: str, reasons: list[str] | None
) -> None:
    secret = seal(cli, bike_shop)
    assert release(cli, bike_shop, "r1", secret)[0] == 0
    before = store_lines(bike_shop)
    loaded = load_config(bike_shop / "evalgate.yml")
    key = load_secret_key(secret)
    held = load_suite_cases(loaded, loaded.suite(None)[1], holdout_secret=key).cases
    ids = [c.id for c in held if c.split == "holdout"][:2]
    retired = bike_shop / "retired.jsonl"
    config = str(bike_shop / "evalgate.yml")
    code, _, err = cli(
        "holdout", "retire", *ids, "--to", str(retired), "--config", config, env={KEY: secret}
    )
    assert code == 0, err
    gone = [line for line in before if line not in store_lines(bike_shop)]
    assert len(gone) == 2
    assert release(cli, bike_shop, "r2", secret)[0] == 0

    # The attack: the two retired ciphertext lines appended again, their regression copies
    # dropped, so the case files show no duplicate.
    write_lines(bike_shop / STORE, store_lines(bike_shop) + gone)
    retired.write_text("")
    signer = {
        "nothing": None,
        "an add record without the key": None,
        "an add record signed with another key": HoldoutKey(X25519PrivateKey.generate()),
        "an add record signed with the key": HoldoutKey(key),
    }[ledger]
    if ledger != "nothing":
        record = readd(gone, signer)
        if signer is None:
            record.pop("mac")
        with (bike_shop / CHANGES).open("a") as handle:
            handle.write(json.dumps(record) + "\n")
    code, report, err = release(cli, bike_shop, "r3", secret)
    if reasons is None:
        assert code == 0, (report, err)
        return
    assert code == 1, err
    assert report["reasons"] == reasons
    assert {line_digest(x) for x in gone} <= set(report["current"]["sealed_lines"])


def three_new_cases() -> list[str]:
    """Three holdout cases for `evalgate holdout add`, as JSONL lines."""
    return [
        json.dumps(
            {
                "id": f"new-{i}",
                "group": f"gn{i}",
                "category": "parts",
                "message": f"Do you stock tyre levers of size {i}?",
            }
        )
        for i in range(3)
    ]


def test_a_failing_rerun_of_a_tag_never_replaces_its_good_record(
    cli: Callable[..., CliResult], bike_shop: Path
) -> None:
    secret = seal(cli, bike_shop)
    assert release(cli, bike_shop, "r1", secret)[0] == 0
    first = store_lines(bike_shop)
    # Three new holdout cases, sealed and recorded: r2 passes on the bigger store.
    new = bike_shop / "more.jsonl"
    write_lines(new, three_new_cases())
    assert cli("holdout", "add", str(new), "--config", str(bike_shop / "evalgate.yml"))[0] == 0
    code, second, err = release(cli, bike_shop, "r2", secret)
    assert code == 0, (second, err)

    # The attack: drop the three new lines and re-run r2 (it fails, as it should) ...
    write_lines(bike_shop / STORE, first)
    code, rerun, _ = release(cli, bike_shop, "r2", secret)
    assert code == 1 and "lost 3 of its" in rerun["reasons"][0]
    # ... so that, if the failing re-run stood for r2, the next release would compare with r1,
    # whose lines the trimmed store matches.
    code, third, _ = release(cli, bike_shop, "r3", secret)
    assert code == 1
    assert third["reasons"][0].startswith(
        f"the sealed holdout lost 3 of its {len(first) + 3} cases since r2 without a recorded"
    )
    # Both runs of r2 are kept, the good one first; the chain counts every run.
    records = sorted(
        (json.loads(p.read_text()) for p in (bike_shop / ".evalgate" / "releases").glob("*.json")),
        key=lambda r: r["seq"],
    )
    assert [(r["name"], r["seq"], r["passed"]) for r in records] == [
        ("r1", 1, True),
        ("r2", 2, True),
        ("r2", 3, False),
        ("r3", 4, False),
    ]


def _rename(root: Path, changes: str) -> None:
    config = root / "evalgate.yml"
    data = yaml.safe_load(config.read_text())
    suite = data["suites"].pop(SUITE)
    suite["sealed_holdout"]["changes"] = changes
    data["suites"]["renamed"] = suite
    config.write_text(yaml.safe_dump(data))


def test_a_renamed_suite_with_its_change_ledger_moved_does_not_pass_a_trimmed_store(
    cli: Callable[..., CliResult], bike_shop: Path
) -> None:
    secret = seal(cli, bike_shop)
    assert release(cli, bike_shop, "r1", secret)[0] == 0
    lines = store_lines(bike_shop)
    # The attack: trim the store, rename the suite, point it at a change ledger that is not
    # there, and start from a state folder with no earlier record.
    write_lines(bike_shop / STORE, lines[:10])
    _rename(bike_shop, "moved.changes.jsonl")
    shutil.rmtree(bike_shop / ".evalgate")
    code, report, err = release(cli, bike_shop, "r2", secret, "--suite", "renamed")
    assert code == 1, err
    assert report["reasons"][0] == (
        "the sealed holdout has 10 cases but its change ledger moved.changes.jsonl is missing "
        "and no earlier release records its lines: restore the change ledger from version control"
    )


# --- 2. write access to the data branch, through the action -----------------------------------


@dataclass
class Repo:
    gh: GitHubServer
    template: Path
    secret: str
    root: Path
    jobs: int = 0

    def release(self, tag: str) -> Job:
        """A push of ``tag`` on main, in a fresh checkout of the sealed example."""
        self.jobs += 1
        workspace = self.root / f"checkout-{self.jobs}" / "workspace"
        shutil.copytree(self.template, workspace)
        sha = self.gh.branch_sha(REPO, "main")
        assert sha is not None
        self.gh.add_tag(REPO, tag, sha)
        return run_action(
            workspace,
            "push",
            push_event(),
            ref=f"refs/tags/{tag}",
            inputs=api(self.gh),
            env=api_env(self.gh) | {"GITHUB_SHA": sha, KEY: self.secret},
        )

    def data(self, name: str) -> str | None:
        found = self.gh.file(REPO, f"evalgate/{SUITE}/{name}", ref=DATA_BRANCH)
        return None if found is None else found.decode()

    def write(self, files: dict[str, str | None], suite: str = SUITE) -> None:
        """The attacker's commit on the data branch (``None`` deletes a file)."""
        self.gh.add_commit(
            REPO, {f"evalgate/{suite}/{k}": v for k, v in files.items()}, branch=DATA_BRANCH
        )


@pytest.fixture
def sealed_repo(
    tmp_path: Path, cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Repo]:
    template = tmp_path / "template"
    copy_example(template / FOLDER)
    secret = seal(cli, template / FOLDER)
    with GitHubServer() as gh:
        gh.add_repo(REPO, files=example_tree())
        yield Repo(gh, template, secret, tmp_path)


def _history(repo: Repo) -> list[dict[str, Any]]:
    text = repo.data("releases.json")
    assert text is not None
    records: list[dict[str, Any]] = json.loads(text)
    return records


def rollback(repo: Repo) -> dict[str, str | None]:
    return {"releases.json": json.dumps(_history(repo)[:-1])}


def strip_macs(repo: Repo) -> dict[str, str | None]:
    return {"releases.json": json.dumps([dict(r, mac=None) for r in _history(repo)])}


def strip_everything_signed(repo: Repo) -> dict[str, str | None]:
    """MACs gone and every field that says the record was keyed, sealed or chained."""
    bare = [
        dict(
            r,
            mac=None,
            seq=None,
            previous=None,
            passed=None,
            holdout_keyed=False,
            sealed_lines=None,
        )
        for r in _history(repo)
    ]
    return {"releases.json": json.dumps(bare)}


def delete_history(repo: Repo) -> dict[str, str | None]:
    return {"releases.json": None}


# (attack, whether the read ledger goes too, which anchors are left, what the refusal says).
# "ledger": the default branch's change ledger holds them; "check runs": only the release
# check runs on the tags' commits (the default branch's anchors deleted, or never committed
# where the job may not write it); "none": the tags deleted as well, so no check run is found,
# and the chain and the ledger still catch what they can (tests/test_hostile_history_anchor.py
# has the attacks on the check runs themselves).
ANCHORED = "anchors release 'v2' as release 2"
BY_CHECK_RUN = "the check run 'evalgate release: bike-shop' on tag v2"
DATA_BRANCH_ATTACKS = [
    (rollback, True, "ledger", ANCHORED + ", but the release history ends at release 1"),
    (strip_macs, True, "ledger", "2 keyed release records carry no MAC (v1, v2)"),
    (strip_everything_signed, True, "ledger", "2 keyed release records carry no MAC (v1, v2)"),
    (delete_history, True, "ledger", ANCHORED + ", but the release history has no signed release"),
    (rollback, False, "ledger", ANCHORED + ", but the release history ends at release 1"),
    (rollback, True, "check runs", BY_CHECK_RUN),
    (delete_history, True, "check runs", BY_CHECK_RUN),
    (rollback, True, "none", "the holdout's read ledger is missing though the history records 1"),
    (strip_macs, True, "none", "2 keyed release records carry no MAC (v1, v2)"),
    (strip_everything_signed, True, "none", "2 keyed release records carry no MAC (v1, v2)"),
]


@pytest.mark.parametrize(
    ("attack", "ledger_too", "left", "refusal"),
    DATA_BRANCH_ATTACKS,
    ids=[
        f"{a.__name__}{'+ledger' if d else ''}-anchors-in-{n.replace(' ', '-')}"
        for a, d, n, _ in DATA_BRANCH_ATTACKS
    ],
)
def test_write_access_to_the_data_branch_cannot_turn_back_the_history(
    sealed_repo: Repo,
    attack: Callable[[Repo], dict[str, str | None]],
    ledger_too: bool,
    left: str,
    refusal: str,
) -> None:
    repo = sealed_repo
    for tag in ("v1", "v2"):
        job = repo.release(tag)
        assert job.code == 0, job.out + job.err
    assert [(r["name"], r["seq"]) for r in _history(repo)] == [("v1", 1), ("v2", 2)]
    anchors = repo.gh.file(REPO, f"{FOLDER}/{CHANGES}", ref="main")
    assert anchors is not None and len(anchors.decode().splitlines()) == 2
    if left != "ledger":
        repo.gh.add_commit(REPO, {f"{FOLDER}/{CHANGES}": None})
    if left == "none":
        for tag in ("v1", "v2"):
            repo.gh.delete_tag(REPO, tag)

    files = attack(repo)
    if ledger_too:
        files["holdout-ledger.jsonl"] = None
    repo.write(files)
    tampered = repo.data("releases.json")

    job = repo.release("v3")
    assert job.code == 2, job.out + job.err
    assert job.outputs.get("verdict") != "pass"
    [error] = job.annotations("error")
    assert refusal in error, error
    assert "data branch's git history" in error
    # Nothing was written over what is left: the history is as the attacker left it.
    assert repo.data("releases.json") == tampered


def test_in_the_action_a_failing_rerun_keeps_the_tags_good_record(
    sealed_repo: Repo, cli: Callable[..., CliResult]
) -> None:
    repo = sealed_repo
    folder = repo.template / FOLDER
    assert repo.release("v1").code == 0
    first = store_lines(folder)
    new = folder / "more.jsonl"
    write_lines(new, three_new_cases())
    assert cli("holdout", "add", str(new), "--config", str(folder / "evalgate.yml"))[0] == 0
    new.unlink()
    job = repo.release("v2")
    assert job.code == 0, job.out + job.err

    # The attack: the three new lines dropped, v2 re-run (it fails), then the next release.
    write_lines(folder / STORE, first)
    assert repo.release("v2").code == 1
    job = repo.release("v3")
    assert job.code == 1, job.out + job.err
    assert any(
        f"lost 3 of its {len(first) + 3} cases since v2" in a for a in job.annotations("error")
    )
    assert [(r["name"], r["seq"], r["passed"]) for r in _history(repo)] == [
        ("v1", 1, True),
        ("v2", 2, True),
        ("v2", 3, False),
        ("v3", 4, False),
    ]


def test_a_default_branch_the_job_cannot_write_gets_the_anchor_line_to_commit(
    sealed_repo: Repo,
) -> None:
    repo = sealed_repo
    path = f"/repos/{REPO}/contents/{FOLDER}/{CHANGES}"
    repo.gh.fail_next(
        "PUT",
        path,
        status=403,
        body={"message": "Resource not accessible by integration", "status": "403"},
        times=2,
    )
    job = repo.release("v1")
    assert job.code == 0, job.out + job.err
    assert repo.gh.file(REPO, f"{FOLDER}/{CHANGES}", ref="main") is None
    [warning] = [w for w in job.annotations("warning") if "release anchor" in w]
    assert "append this line to it and commit" in warning
    line = warning.split("is detected: ", 1)[1]
    anchor = json.loads(line.replace("%2C", ",").replace("%3A", ":").replace("%25", "%"))
    [record] = _history(repo)
    assert (anchor["change"], anchor["release"], anchor["seq"], anchor["record"]) == (
        "release",
        "v1",
        1,
        record["mac"],
    )


def test_a_renamed_suite_in_the_action_finds_the_history_it_left_behind(
    sealed_repo: Repo,
) -> None:
    repo = sealed_repo
    assert repo.release("v1").code == 0
    # The attack: the suite renamed, its change ledger moved and rewritten to match a store
    # trimmed to 10 cases (adds need no key), no anchors: under its new name the suite has
    # no record yet.
    folder = repo.template / FOLDER
    lines = store_lines(folder)[:10]
    write_lines(folder / STORE, lines)
    changes = [json.loads(x) for x in (folder / CHANGES).read_text().splitlines()]
    add = dict(changes[0], count=10, after=10, lines=[line_digest(x) for x in lines])
    (folder / "moved.changes.jsonl").write_text(json.dumps(add) + "\n")
    (folder / CHANGES).unlink()
    _rename(folder, "moved.changes.jsonl")

    job = repo.release("v2")
    assert job.code == 2, job.out + job.err
    [error] = job.annotations("error")
    assert "suite 'renamed' has no release history" in error
    assert f"signed by this holdout key under suite '{SUITE}'" in error
    assert repo.gh.file(REPO, "evalgate/renamed/releases.json", ref=DATA_BRANCH) is None


# --- 3. public records carry no per-case group ------------------------------------------------


def test_no_holdout_group_name_keyed_or_not_in_anything_a_release_publishes(
    cli: Callable[..., CliResult], bike_shop: Path
) -> None:
    secret = seal(cli, bike_shop)
    key = load_secret_key(secret)
    loaded = load_config(bike_shop / "evalgate.yml")
    cases = load_suite_cases(loaded, loaded.suite(None)[1], holdout_secret=key).cases
    groups = {c.group for c in cases if c.split == "holdout" and c.group}
    assert len(groups) > 20
    published = []
    for name in ("r1", "r2"):
        code, report, err = release(cli, bike_shop, name, secret)
        assert code == 0, err
        published += [json.dumps(report), err]
        assert {h["group"] for h in report["current"]["holdout_cases"]} == {None}
    published += [
        p.read_text(errors="replace")
        for p in (bike_shop / ".evalgate").rglob("*")
        if p.is_file() and p.suffix in (".json", ".jsonl")
    ]
    keyed = HoldoutKey(key)
    for group in groups:
        for needle in (keyed.group(group), HoldoutKey().group(group)):
            assert needle is not None
            assert not any(needle in text for text in published), group


# --- 4. the judge's holdout labels are read once per judge identity -----------------------------

JUDGED = "bike-shop-judged"
RUBRIC = f"{FOLDER}/judge-rubric.txt"
BASE_RUBRIC = (EXAMPLE / "judge-rubric.txt").read_text(encoding="utf-8")


def judge_pr_job(root: Path, gh: GitHubServer, files: dict[str, str]) -> Job:
    workspace = root / "workspace"
    copy_example(workspace / FOLDER)
    for path, text in files.items():
        (workspace / path).write_text(text, encoding="utf-8")
    return run_action(
        workspace,
        "pull_request",
        pr_event(),
        ref="refs/pull/7/merge",
        inputs=api(gh) | {"config": "judge.yml"},
        env=api_env(gh),
    )


def label_reads(gh: GitHubServer) -> list[LedgerRecord]:
    text = gh.file(REPO, f"evalgate/{JUDGED}/holdout-ledger.jsonl", ref=DATA_BRANCH)
    lines = [] if text is None else text.decode().splitlines()
    return [r for r in map(LedgerRecord.model_validate_json, lines) if r.purpose == "judge check"]


# (what each successive push of the pull request changes, the judge reads recorded after it)
JUDGE_PUSHES = [
    ({PROMPT: HARMLESS}, 1),  # the suite's prompt: the judge reads its holdout labels once
    ({PROMPT: HARMLESS + "Be brief.\n"}, 1),  # again the prompt: the same judge, no new read
    ({PROMPT: HARMLESS + "Be kind.\n"}, 1),
    # The judge itself changes: the new judge and the base's (paired with it) are read; the
    # base judge read the labels before, so one new read.
    ({RUBRIC: BASE_RUBRIC.replace("Pass a reply", "Pass any reply")}, 2),
    ({RUBRIC: BASE_RUBRIC.replace("Pass a reply", "Pass any reply")}, 2),  # pushed again
]


def test_the_judges_holdout_labels_are_read_once_per_judge_identity(tmp_path: Path) -> None:
    with GitHubServer() as gh:
        gh.add_repo(REPO, files=example_tree())
        open_pull(gh, {PROMPT: HARMLESS})
        calls = []
        for number, (files, reads) in enumerate(JUDGE_PUSHES):
            job = judge_pr_job(tmp_path / f"push-{number}", gh, files)
            assert job.code in (0, 1), job.out + job.err
            records = label_reads(gh)
            assert len(records) == reads, (number, [r.prompt_sha256[:8] for r in records])
            assert f"Holdout label reads: {reads} (budget 10)" in job.summary
            calls.append(job.summary)
        # The same judge shows its recorded result, and says the read was not counted again.
        assert "this judge read these holdout labels before" in calls[1]
        # One record per identity, each with its aggregate result kept for the next job.
        identities = [r.prompt_sha256 for r in label_reads(gh)]
        assert len(set(identities)) == len(identities) == 2
        assert all(r.result and r.result["check"]["split"] == "holdout" for r in label_reads(gh))


# --- 5. the chain, pure -------------------------------------------------------------------------


def chained(key: HoldoutKey, days: list[int]) -> list[ReleaseRecord]:
    """Signed, chained records made one a day, as release jobs make them."""
    made: list[ReleaseRecord] = []
    for day in days:
        seq, previous = next_link(made)
        bare = ReleaseRecord(
            name=f"r{day}",
            time=datetime(2026, 1, day, tzinfo=UTC),
            git_commit=None,
            git_ref=None,
            prompt=PromptInfo(name="v3", sha256="0" * 64),
            model="fake/fake-classifier",
            dev=Score(rate=Rate.of(8, 10), se=0.1),
            holdout=Score(rate=Rate.of(8, 10), se=0.1),
            holdout_sha256="digest",
            holdout_cases=[],
            holdout_keyed=key.keyed,
            seq=seq if key.keyed else None,
            previous=previous if key.keyed else None,
            passed=True,
        )
        made.append(sign_record(bare, key))
    return made


# (what is done to a chain of five, the refusal; None: it stands)
CHAIN_EDITS: list[tuple[str, Callable[[list[ReleaseRecord]], list[ReleaseRecord]], str | None]] = [
    ("untouched", lambda h: h, None),
    ("the middle record removed", lambda h: h[:2] + h[3:], "chain is broken at 'r4'"),
    ("the first record removed", lambda h: h[1:], "chain is broken at 'r2'"),
    ("one MAC stripped", lambda h: [h[0].model_copy(update={"mac": None}), *h[1:]], "carry no MAC"),
    # The tail cut off: the chain alone cannot tell (the anchors do, above).
    ("the last record removed", lambda h: h[:-1], None),
]


@pytest.mark.parametrize(
    ("edit", "change", "refusal"), CHAIN_EDITS, ids=[e[0] for e in CHAIN_EDITS]
)
def test_the_chain_shows_records_taken_from_its_start_or_middle(
    edit: str, change: Callable[[list[ReleaseRecord]], list[ReleaseRecord]], refusal: str | None
) -> None:
    key = HoldoutKey(X25519PrivateKey.generate())
    history = change(chained(key, [1, 2, 3, 4, 5]))
    if refusal is None:
        check_chain(history, key, "releases.json")
        return
    with pytest.raises(UserError, match=refusal):
        check_chain(history, key, "releases.json")


def test_unsigned_records_from_before_the_holdout_was_sealed_stand() -> None:
    key = HoldoutKey(X25519PrivateKey.generate())
    plaintext_era = chained(HoldoutKey(), [1, 2])  # a plaintext holdout without a key
    history = plaintext_era + chained(key, [5, 6])
    check_chain(history, key, "releases.json", sealed_since=datetime(2026, 1, 3, tzinfo=UTC))
    # The same unsigned records dated after the sealing had their MACs taken off.
    with pytest.raises(UserError, match="2 keyed release records carry no MAC"):
        check_chain(history, key, "releases.json", sealed_since=datetime(2026, 1, 1, tzinfo=UTC))
