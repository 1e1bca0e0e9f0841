"""The checkout is data, never state: what a pull request commits is not trusted as the job's own.

Each attack is data (the attack, the safe outcome), driven through the action in-process as
GitHub runs it: the real PyGithub client against the GitHub stand-in, and the suite on the
anthropic backend against the Messages stand-in, so every model call is counted.

- ``FORGED``: ``.evalgate/cache/**`` entries holding right answers, keyed exactly as
  ``ResponseCache.key`` keys the requests the job will send, for a prompt that answers wrong:
  in a pull request's head (with a baseline artefact, and with the in-job baseline), at a
  release tag, and laid onto the base checkout by a fork's data. The model is called for
  every dev case and the verdict is the prompt's own.
- ``PROGRAMS``: a pull request that changes only the ``command`` backend's program runs
  (a script, the program itself, a file it reads, a module ``python -m`` runs or another
  module of its package).
- The ``.evalgate/`` folder a pull request commits is named in the comment and the summary.
- ``ResponseCache`` with a key: a planted, altered or swapped entry is a miss.
"""

from __future__ import annotations

import io
import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from conftest import CliResult
from test_action import (
    FOLDER,
    NO_LABELS,
    PROMPT,
    REPO,
    SUITE,
    Job,
    api,
    api_env,
    baseline_text,
    comments,
    edit_config,
    gh,
    make_workspace,
    messages,
    open_pull,
    pr_job,
    push_event,
    run_action,
    suite_of,
    upload,
    use_anthropic,
)
from test_fork import collect, gate_in

from evalgate.action.fork import ForkData
from evalgate.app import RunOptions, World, plan_run
from evalgate.backends.base import Reply, Request
from evalgate.config.load import load_config
from evalgate.running.cache import ResponseCache
from evalgate.running.suite import cases_to_run, run_suite
from evalgate.setup import doctor
from tests.support.github_server import GitHubServer
from tests.support.messages_server import MessagesServer

__all__ = ["baseline_text", "gh", "messages"]  # fixtures, imported to be used here

KEY = {"anthropic_api_key": "sk-ant-test-key"}
CACHE = f"{FOLDER}/.evalgate/cache"


# --------------------------------------------------------------------------- the forger


class Forger:
    """The attacker's model: the right label for every case it is asked about, under the name
    of the backend the job will use (the cache keys by it)."""

    offline: ClassVar[bool] = True

    def __init__(self, answers: dict[str, Any], name: str) -> None:
        self.answers = answers
        self.name = name

    def complete(self, request: Request) -> Reply:
        case_id = str((request.case or {}).get("id"))
        return Reply(text=json.dumps({"category": self.answers[case_id]}), stop_reason="end_turn")


class Silent:
    """A model that must not be asked: every reply has to come from the cache."""

    offline: ClassVar[bool] = True

    def __init__(self, name: str) -> None:
        self.name = name

    def complete(self, request: Request) -> Reply:
        raise AssertionError("the forged cache should have answered")


def quiet_world() -> World:
    return World(env={}, err=io.StringIO(), warn=lambda _: None, say=lambda _: None)


def forge(workspace: Path, backend: str = "anthropic") -> dict[str, str]:
    """``.evalgate/cache/**`` in ``workspace``: right answers for the requests the job will send
    for the head's ship version, keyed and written exactly as the unauthenticated
    ResponseCache does. Returns the files, as a commit would carry them."""
    loaded = load_config(workspace / FOLDER / "evalgate.yml")
    folder = workspace / CACHE
    spec = plan_run(quiet_world(), loaded, SUITE, "v3", RunOptions())
    answers = {c.id: c.expected for c in cases_to_run(spec)}
    forged = run_suite(spec, Forger(answers, backend), loaded.root, cache=ResponseCache(folder))
    assert all(c.passed for c in forged.cases)
    # The attack is real: an unauthenticated cache over these files answers every case right,
    # with no model call (what PR jobs, in-job baselines and releases read before).
    replay = ResponseCache(folder)
    again = run_suite(spec, Silent(backend), loaded.root, cache=replay)
    assert replay.misses == 0 and replay.hits == len(answers)
    assert all(c.passed for c in again.cases)
    return {
        p.relative_to(workspace).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(folder.rglob("*.json"))
    }


def dev_cases(workspace: Path, splits: frozenset[str] | None = None) -> int:
    loaded = load_config(workspace / FOLDER / "evalgate.yml")
    options = RunOptions() if splits is None else RunOptions(splits=splits)
    return len(cases_to_run(plan_run(quiet_world(), loaded, SUITE, "v3", options)))


def calls(server: MessagesServer) -> int:
    return sum(1 for r in server.requests if r.path == "/v1/messages")


def anthropic_baseline(tmp_path: Path, gh: GitHubServer, server: MessagesServer) -> None:
    """The default branch's baseline artefact, made by a push job on the anthropic backend."""
    base = make_workspace(tmp_path / "base")
    use_anthropic(base)
    env = {"ANTHROPIC_BASE_URL": server.url}
    made = run_action(base, "push", push_event(), ref="refs/heads/main", inputs=KEY, env=env)
    assert made.code == 0, made.out + made.err
    upload(gh, Path(made.outputs["run_file"]).read_text(encoding="utf-8"))


def fork_job(
    root: Path,
    gh: GitHubServer,
    data: ForkData,
    prepare: Callable[[Path], None],
    env: dict[str, str],
) -> Job:
    """The base repository's workflow_run job on the fork's data (as tests/action/test_fork.py
    drives it), over a checkout of the default branch that ``prepare`` makes."""
    workspace = make_workspace(root / "base")
    prepare(workspace)
    return gate_in(workspace, gh, data, inputs=KEY, env=env)


def anthropic_on_main(gh: GitHubServer) -> None:
    """The default branch's config on the anthropic backend, as the checkouts have it."""
    path = f"{FOLDER}/evalgate.yml"
    current = gh.file(REPO, path, ref="main")
    assert current is not None
    config = yaml.safe_load(current.decode("utf-8"))
    suite_of(config)["model"] = {
        "backend": "anthropic",
        "name": "claude-haiku-4-5",
        "max_tokens": 64,
        "temperature": 0,
    }
    gh.add_commit(REPO, {path: yaml.safe_dump(config, sort_keys=False)}, message="anthropic")


# --------------------------------------------------------------------------- the attacks


@dataclass(frozen=True)
class Forged:
    """A place the forged cache reaches the job, and how the job is driven there."""

    name: str
    drive: Callable[[Path, GitHubServer, MessagesServer], tuple[Job, int]]
    # The verdict the prompt earns on its own (not the forged one); None: the release gate's
    # own, with no history to compare with.
    verdict: str | None


def pr_with_artefact(root: Path, gh: GitHubServer, server: MessagesServer) -> tuple[Job, int]:
    anthropic_on_main(gh)
    anthropic_baseline(root, gh, server)
    workspace = make_workspace(root, NO_LABELS)
    use_anthropic(workspace)
    planted = forge(workspace)
    open_pull(gh, {PROMPT: NO_LABELS, **planted})
    server.reset()
    job = pr_job(workspace, gh, inputs=KEY, env={"ANTHROPIC_BASE_URL": server.url})
    return job, dev_cases(workspace)


def pr_with_in_job_baseline(
    root: Path, gh: GitHubServer, server: MessagesServer
) -> tuple[Job, int]:
    anthropic_on_main(gh)
    workspace = make_workspace(root, NO_LABELS)
    use_anthropic(workspace)
    planted = forge(workspace)
    open_pull(gh, {PROMPT: NO_LABELS, **planted})
    server.reset()
    job = pr_job(workspace, gh, inputs=KEY, env={"ANTHROPIC_BASE_URL": server.url})
    # Both the candidate and the base branch's prompt were sent for every dev case.
    return job, 2 * dev_cases(workspace)


def release_tag(root: Path, gh: GitHubServer, server: MessagesServer) -> tuple[Job, int]:
    anthropic_on_main(gh)
    gh.add_commit(REPO, {PROMPT: NO_LABELS}, message="release v1.0.0")
    sha = gh.branch_sha(REPO, "main")
    assert sha is not None
    workspace = make_workspace(root, NO_LABELS)
    use_anthropic(workspace)
    forge(workspace)  # committed at the tag, so in the checkout
    server.reset()
    job = run_action(
        workspace,
        "push",
        push_event(),
        ref="refs/tags/v1.0.0",
        inputs=api(gh) | KEY,
        env=api_env(gh) | {"GITHUB_SHA": sha, "ANTHROPIC_BASE_URL": server.url},
    )
    # Every dev case and every holdout case (holdout replies are never cached) was sent.
    everything = frozenset({"dev", "holdout", "regression"})
    return job, dev_cases(workspace, everything)


def fork_overlay(root: Path, gh: GitHubServer, server: MessagesServer) -> tuple[Job, int]:
    """The base config reads ``cases: "*.json"``: a fork's data may try to lay the forged
    cache onto the base checkout through the overlay."""

    def json_cases(workspace: Path) -> None:
        (workspace / FOLDER / "cases.jsonl").rename(workspace / FOLDER / "cases.json")
        edit_config(workspace, lambda c: suite_of(c).update(cases="*.json"))
        use_anthropic(workspace)

    reference = make_workspace(root / "reference")
    json_cases(reference)
    gh.add_commit(
        REPO,
        {
            f"{FOLDER}/evalgate.yml": (reference / FOLDER / "evalgate.yml").read_text(),
            f"{FOLDER}/cases.json": (reference / FOLDER / "cases.json").read_text(),
            f"{FOLDER}/cases.jsonl": None,
        },
        message="cases as *.json",
    )
    (reference / PROMPT).write_text(NO_LABELS, encoding="utf-8")
    planted = forge(reference)
    _, data = collect(root, gh, {PROMPT: NO_LABELS, **planted})
    server.reset()
    job = fork_job(root, gh, data, json_cases, env={"ANTHROPIC_BASE_URL": server.url})
    refused = job.outputs.get("verdict") == "fail" and "refused" in job.summary
    # Refused whole (the overlay keeps to the suite's files), or run with every dev case sent,
    # for the candidate and the base branch's prompt (no artefact: the in-job baseline).
    return job, 0 if refused else 2 * dev_cases(reference)


FORGED = [
    Forged("pull request, artefact baseline", pr_with_artefact, "fail"),
    Forged("pull request, in-job baseline", pr_with_in_job_baseline, "fail"),
    Forged("release tag", release_tag, None),
    Forged("fork data over the base checkout", fork_overlay, "fail"),
]


@pytest.mark.parametrize("attack", FORGED, ids=[a.name for a in FORGED])
def test_a_forged_response_cache_is_a_miss_and_the_model_is_called(
    attack: Forged, tmp_path: Path, gh: GitHubServer, messages: MessagesServer
) -> None:
    job, expected_calls = attack.drive(tmp_path, gh, messages)

    if attack.verdict is not None:
        assert job.outputs["verdict"] == attack.verdict, job.out + job.err
        assert job.code == 1
    assert calls(messages) == expected_calls
    assert "cache: 0 hits" in job.err or expected_calls == 0
    if job.outputs.get("accuracy"):
        assert float(job.outputs["accuracy"]) < 0.5  # the prompt's own accuracy, not 1


def test_the_cli_in_ci_reads_the_checkouts_cache_only_when_asked(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    """A workflow that runs ``evalgate run`` on a pull request's checkout (CI set) does not
    read the cache the pull request committed; ``--cache`` is the local opt-in."""
    workspace = make_workspace(tmp_path, NO_LABELS)
    forge(workspace, backend="fake")
    config = str(workspace / FOLDER / "evalgate.yml")
    code, out, err = cli("run", "v3", "--config", config, env={"CI": "true"})
    assert code == 0, err
    assert "cache:" not in err and "cached" not in err
    assert "(0/143)" in out  # the prompt's own accuracy: the model was asked
    code, _, err = cli("run", "v3", "--cache", "--config", config, env={"CI": "true"})
    assert "cache: 143 hits, 0 misses" in err  # the opt-in reads the folder as the user's


def test_within_one_job_the_signed_cache_still_answers_a_request_sent_twice(
    tmp_path: Path, gh: GitHubServer, messages: MessagesServer
) -> None:
    """A pull request that changes the config but not the prompt, with no artefact: the in-job
    baseline sends the candidate's requests again, and the job's own entries answer them."""
    anthropic_on_main(gh)
    workspace = make_workspace(tmp_path)
    use_anthropic(workspace)
    config = workspace / FOLDER / "evalgate.yml"
    config.write_text(config.read_text() + "# reviewed\n", encoding="utf-8")
    open_pull(gh, {f"{FOLDER}/evalgate.yml": config.read_text()})
    job = pr_job(workspace, gh, inputs=KEY, env={"ANTHROPIC_BASE_URL": messages.url})
    n = dev_cases(workspace)
    assert job.outputs["verdict"] == "pass", job.out + job.err
    assert calls(messages) == n
    assert f"cache: 0 hits, {n} misses" in job.err and f"cache: {n} hits, 0 misses" in job.err


# --------------------------------------------------------------------------- the ignored folder


def test_the_committed_state_folder_is_named_in_the_comment_and_the_summary(
    tmp_path: Path, gh: GitHubServer, messages: MessagesServer
) -> None:
    job, _ = pr_with_artefact(tmp_path, gh, messages)
    planted = len(list((tmp_path / "workspace" / CACHE).rglob("*.json")))
    assert planted > 50
    line = f"{FOLDER}/.evalgate/ ({planted} files); the job ignored it"
    [body] = comments(gh)
    # Markdown escapes the parentheses: compare the text as it reads.
    assert line in body.replace("\\", "")
    assert line in job.summary.replace("\\", "")
    # Nothing the job keeps was written into the checkout's folder either.
    assert (
        len(list((tmp_path / "workspace" / FOLDER / ".evalgate").rglob("*")))
        == len(list((tmp_path / "workspace" / CACHE).rglob("*"))) + 1
    )


def test_a_pull_request_without_a_state_folder_has_no_such_note(
    tmp_path: Path, gh: GitHubServer, messages: MessagesServer
) -> None:
    anthropic_on_main(gh)
    anthropic_baseline(tmp_path, gh, messages)
    workspace = make_workspace(tmp_path, NO_LABELS)
    use_anthropic(workspace)
    open_pull(gh, {PROMPT: NO_LABELS})
    job = pr_job(workspace, gh, inputs=KEY, env={"ANTHROPIC_BASE_URL": messages.url})
    assert job.outputs["verdict"] == "fail"
    [body] = comments(gh)
    assert "the job ignored it" not in body and "the job ignored it" not in job.summary


def test_the_job_writes_its_state_outside_the_checkout_and_leaves_none(
    tmp_path: Path, gh: GitHubServer, baseline_text: str
) -> None:
    upload(gh, baseline_text)
    open_pull(gh, {PROMPT: NO_LABELS})
    workspace = make_workspace(tmp_path, NO_LABELS)
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    job = pr_job(workspace, gh, env={"RUNNER_TEMP": str(temp)})
    assert job.outputs["verdict"] == "fail", job.out + job.err
    assert gh.find_requests("GET", "/repos/*/actions/artifacts/*/zip")  # a download was made
    assert "cache: 0 hits" in job.err  # and the cache was used
    # Nothing in the checkout, and the job's folder is gone with the job.
    assert not (workspace / FOLDER / ".evalgate").exists()
    assert list(temp.iterdir()) == []


# --------------------------------------------------------------------------- the program


ANSWER = 'printf \'{"category": "other"}\'\n'
# A package the command runs as a module: its entry point imports a sibling.
ANSWER_PY = "from app.reply import REPLY\n\nprint(REPLY)\n"
REPLY_PY = 'REPLY = \'{"category": "other"}\'\n'


@dataclass(frozen=True)
class Program:
    name: str
    command: list[str] | str
    files: dict[str, str]
    changed: str  # the one file the pull request changes


PROGRAMS = [
    Program(
        "a script an interpreter runs", ["sh", "answer.sh"], {"answer.sh": ANSWER}, "answer.sh"
    ),
    Program(
        "the program itself", "./bin/answer", {"bin/answer": "#!/bin/sh\n" + ANSWER}, "bin/answer"
    ),
    Program(
        "a file the program reads",
        ["sh", "answer.sh", "--labels", "labels.txt"],
        {"answer.sh": ANSWER, "labels.txt": "other\n"},
        "labels.txt",
    ),
    Program(
        "a module python runs with -m",
        ["python3", "-m", "app.answer"],
        {"app/__init__.py": "", "app/answer.py": ANSWER_PY, "app/reply.py": REPLY_PY},
        "app/answer.py",
    ),
    Program(
        "a module of the package python -m runs",
        "python3 -u -m app.answer",
        {"app/__init__.py": "", "app/answer.py": ANSWER_PY, "app/reply.py": REPLY_PY},
        "app/reply.py",
    ),
]


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_a_pull_request_that_changes_only_the_command_program_is_run(
    program: Program, tmp_path: Path, gh: GitHubServer
) -> None:
    def command(workspace: Path) -> None:
        def change(config: dict[str, Any]) -> None:
            suite_of(config)["model"] = {
                "backend": "command",
                "name": "bike-shop-app",
                "options": {"command": program.command},
            }

        edit_config(workspace, change)
        for path, text in program.files.items():
            target = workspace / FOLDER / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            target.chmod(target.stat().st_mode | stat.S_IXUSR)

    reference = make_workspace(tmp_path / "reference")
    command(reference)
    on_main = {f"{FOLDER}/evalgate.yml": (reference / FOLDER / "evalgate.yml").read_text()}
    on_main |= {f"{FOLDER}/{p}": t for p, t in program.files.items()}
    gh.add_commit(REPO, on_main, message="the app under test")
    changed = program.files[program.changed] + "# answers faster\n"
    open_pull(gh, {f"{FOLDER}/{program.changed}": changed})
    workspace = make_workspace(tmp_path)
    command(workspace)
    (workspace / FOLDER / program.changed).write_text(changed, encoding="utf-8")

    job = pr_job(workspace, gh)

    assert job.outputs["verdict"] != "skipped", job.out + job.err
    assert not any(line.startswith(f"{SUITE}: skipped") for line in job.out.splitlines())
    assert comments(gh), "the suite ran and commented"


# --------------------------------------------------------------------------- the cache itself

REQUEST = Request(
    system="Classify.",
    messages=(),
    model="claude-haiku-4-5",
    max_tokens=64,
    temperature=0.0,
    case={"id": "bk-001", "input": {"message": "hello"}},
)
RIGHT = Reply(text='{"category": "parts"}', stop_reason="end_turn")


def planted_plain(folder: Path) -> None:
    """The entry a plain cache would read, at the name ResponseCache.key gives it."""
    ResponseCache(folder).put(REQUEST, "anthropic", RIGHT)


def planted_at_keyed_name(folder: Path) -> None:
    """A copy of a genuine entry of another key's cache (another job's)."""
    ResponseCache(folder, key=os.urandom(32)).put(REQUEST, "anthropic", RIGHT)


TAMPERING = [
    ("an entry keyed as ResponseCache.key keys it", planted_plain),
    ("an entry written under another job's key", planted_at_keyed_name),
]


@pytest.mark.parametrize(("attack", "plant"), TAMPERING, ids=[t[0] for t in TAMPERING])
def test_a_keyed_cache_finds_no_entry_it_did_not_write(
    attack: str, plant: Callable[[Path], None], tmp_path: Path
) -> None:
    plant(tmp_path)
    cache = ResponseCache(tmp_path, key=os.urandom(32))
    assert cache.get(REQUEST, "anthropic") is None
    assert (cache.hits, cache.misses) == (0, 1)


def test_a_keyed_cache_refuses_an_entry_altered_or_moved(tmp_path: Path) -> None:
    key = os.urandom(32)
    cache = ResponseCache(tmp_path, key=key)
    other = REQUEST.model_copy(update={"case": {"id": "bk-002", "input": {"message": "bye"}}})
    cache.put(REQUEST, "anthropic", RIGHT)
    cache.put(other, "anthropic", Reply(text='{"category": "other"}'))
    assert cache.get(REQUEST, "anthropic") == RIGHT  # its own entries serve
    first, second = sorted(tmp_path.rglob("*.json"))
    # Swapped: each file now holds the other's (genuine) entry.
    a, b = first.read_bytes(), second.read_bytes()
    first.write_bytes(b)
    second.write_bytes(a)
    assert cache.get(REQUEST, "anthropic") is None and cache.get(other, "anthropic") is None
    # Altered: the reply changed, its MAC kept.
    entry = json.loads(a)
    entry["reply"] = Reply(text='{"category": "complaint"}').model_dump_json()
    first.write_text(json.dumps(entry))
    second.write_text(json.dumps(entry))
    assert cache.get(REQUEST, "anthropic") is None and cache.get(other, "anthropic") is None
    # The key is in no repr a traceback or a log might print.
    assert key.hex() not in repr(cache) and str(key) not in repr(cache)


def test_the_plain_cache_still_serves_local_runs(tmp_path: Path) -> None:
    planted_plain(tmp_path)
    cache = ResponseCache(tmp_path)
    assert cache.get(REQUEST, "anthropic") == RIGHT
    assert ResponseCache.key(REQUEST, "anthropic") in {p.stem for p in tmp_path.rglob("*.json")}


# --------------------------------------------------------------------------- the workflow

OLD_CACHE_STEP = """\
      - uses: actions/cache@1bd1e32a3bdc45362d1e726936510720a7c30a57 # v4.2.0
        with:
          path: .evalgate/cache
          key: evalgate-${{ github.sha }}
          restore-keys: evalgate-
"""


@pytest.mark.parametrize(
    ("step", "warned"), [("", False), (OLD_CACHE_STEP, True)], ids=["as init writes it", "old"]
)
def test_doctor_warns_of_a_cache_step_that_restores_the_state_folder(
    step: str, warned: bool, tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    code, _, err = cli("init", "--dir", str(tmp_path), "--yes", "--suite", "main")
    assert code == 0, err
    workflow = tmp_path / ".github" / "workflows" / "evalgate.yml"
    text = workflow.read_text(encoding="utf-8")
    assert "actions/cache" not in text
    anchor = "      - id: evalgate\n"
    workflow.write_text(text.replace(anchor, step + anchor, 1), encoding="utf-8")
    report = doctor.doctor(tmp_path, tmp_path / "evalgate.yml")
    found = [f for f in report.findings if f.check.endswith(": response cache")]
    if warned:
        [finding] = found
        assert finding.status == "warn" and "job gate restores .evalgate/" in finding.message
        assert finding.fix == "remove the actions/cache step"
    else:
        assert found == []
