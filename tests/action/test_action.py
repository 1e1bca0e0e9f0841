"""The action's entry point, ``evalgate.action.action``, driven in-process as GitHub runs it.

Each test builds the GitHub environment (an event file, ``GITHUB_OUTPUT``, ``GITHUB_STEP_SUMMARY``,
``INPUT_*``) around a copy of examples/bike-shop, and the real PyGithub client talks to the
loopback GitHub stand-in. Suites run on the fake backend; where a test must prove that no model
was called, the suite uses the anthropic backend against the Messages stand-in instead.
"""

from __future__ import annotations

import io
import itertools
import json
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import EXAMPLE, copy_example

from evalgate.action.inputs import Inputs
from evalgate.action.main import action, connect_repo
from evalgate.action.modes import detect_mode
from evalgate.backends.fake import load_rules
from evalgate.cases.read import load_cases
from evalgate.cases.split import assign_all
from evalgate.config.load import load_config
from evalgate.errors import UserError
from evalgate.runs.schema import Run, read_run
from tests.support.github_server import Artifact, GitHubServer, WorkflowRun
from tests.support.messages_server import Knobs, MessagesServer

REPO = "acme/widgets"
FORK = "forker/widgets"
FOLDER = "examples/bike-shop"
PROMPT = f"{FOLDER}/prompts/v3.txt"
ARTIFACT = "evalgate-baseline"
DATA_BRANCH = "evalgate-data"
MARKER = "<!-- evalgate:suite=bike-shop -->"
SUITE = "bike-shop"

V3 = (EXAMPLE / "prompts" / "v3.txt").read_text(encoding="utf-8")
# The fake model answers the same whatever else the prompt says: a harmless edit.
HARMLESS = V3 + "\nKeep your reply short.\n"
# Without "JSON" the fake replies "Category: x." instead of the asked-for JSON.
NO_JSON = V3.replace("JSON", "plain text")
# With a label not named, the fake answers in its own words ("customer complaint"): all wrong.
NO_LABELS = V3.replace("complaint", "grievance")


# --------------------------------------------------------------------------- the job


@dataclass
class Job:
    """What one action run left behind."""

    code: int
    out: str
    err: str
    outputs: dict[str, str]
    summary: str

    def annotations(self, level: str) -> list[str]:
        return [line for line in self.out.splitlines() if line.startswith(f"::{level} ")]


def parse_outputs(text: str) -> dict[str, str]:
    """``GITHUB_OUTPUT``: ``name=value`` lines, or ``name<<DELIMITER`` blocks."""
    values: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            block = []
            for inner in lines:
                if inner == delimiter:
                    break
                block.append(inner)
            value = "\n".join(block)
        elif line:
            name, _, value = line.partition("=")
        else:
            continue
        assert name not in values, f"output {name} written twice"
        values[name] = value
    return values


_jobs = itertools.count()


def run_action(
    workspace: Path,
    event_name: str,
    event: Mapping[str, Any],
    *,
    ref: str,
    inputs: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    connect: Callable[..., Any] | None = None,
) -> Job:
    """One run of the action in ``workspace`` (which holds examples/bike-shop)."""
    folder = workspace.parent / f"job-{next(_jobs)}"
    folder.mkdir()
    (folder / "event.json").write_text(json.dumps(event), encoding="utf-8")
    (folder / "output").write_text("", encoding="utf-8")
    (folder / "summary.md").write_text("", encoding="utf-8")
    environment = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_REF": ref,
        "GITHUB_REF_NAME": ref.rsplit("/", 1)[-1],
        "GITHUB_EVENT_PATH": str(folder / "event.json"),
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_OUTPUT": str(folder / "output"),
        "GITHUB_STEP_SUMMARY": str(folder / "summary.md"),
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_RUN_ID": "42",
        "INPUT_WORKING_DIRECTORY": FOLDER,
    }
    environment.update({f"INPUT_{k.upper()}": v for k, v in (inputs or {}).items()})
    environment.update(env or {})
    out, err = io.StringIO(), io.StringIO()
    if connect is None:
        code = action(environment, out, err)
    else:
        code = action(environment, out, err, connect=connect)
    return Job(
        code=code,
        out=out.getvalue(),
        err=err.getvalue(),
        outputs=parse_outputs((folder / "output").read_text(encoding="utf-8")),
        summary=(folder / "summary.md").read_text(encoding="utf-8"),
    )


def test_the_job_closes_its_github_connections_when_it_ends(
    tmp_path: Path, gh: GitHubServer, baseline_text: str
) -> None:
    """The stand-in keeps a connection open as long as the client does (HTTP/1.1 keep-alive,
    15 s idle). The job closes its client when it ends, even while something still holds the
    repository handle (here the test does, so the garbage collector cannot do it instead):
    a client left to the collector holds connections past the job, and the collector finds
    its unclosed sockets in whatever runs next."""
    upload(gh, baseline_text)
    open_pull(gh, {PROMPT: HARMLESS})
    held: list[Any] = []

    def connect(env: Mapping[str, str], inputs: Inputs) -> Any:
        held.append(connect_repo(env, inputs))
        return held[-1]

    job = run_action(
        make_workspace(tmp_path, HARMLESS),
        "pull_request",
        pr_event(),
        ref="refs/pull/7/merge",
        inputs=api(gh),
        env=api_env(gh),
        connect=connect,
    )
    assert job.code == 0, job.out + job.err
    assert held and gh.find_requests("GET", "/repos/*/pulls/*")  # it did talk to GitHub
    ends = time.monotonic() + 10  # well inside the stand-in's 15 s idle timeout
    while gh.open_connections and time.monotonic() < ends:
        time.sleep(0.01)
    assert gh.open_connections == 0


def pr_job(
    workspace: Path,
    gh: GitHubServer,
    *,
    inputs: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Job:
    """One pull_request run for PR #7 against the GitHub stand-in, with the write token."""
    return run_action(
        workspace,
        "pull_request",
        pr_event(),
        ref="refs/pull/7/merge",
        inputs=api(gh) | dict(inputs or {}),
        env=api_env(gh) | dict(env or {}),
    )


def push_event() -> dict[str, Any]:
    return {"ref": "refs/heads/main", "repository": {"full_name": REPO, "default_branch": "main"}}


def pr_event(number: int = 7, head_repo: str = REPO) -> dict[str, Any]:
    return {
        "action": "synchronize",
        "number": number,
        "pull_request": {
            "number": number,
            "head": {"ref": "feature", "repo": {"full_name": head_repo}},
            "base": {"ref": "main", "repo": {"full_name": REPO}},
        },
        "repository": {"full_name": REPO, "default_branch": "main"},
    }


# --------------------------------------------------------------------------- the world


def make_workspace(root: Path, prompt: str | None = None) -> Path:
    """A checkout: the repository with examples/bike-shop, its v3 prompt optionally changed."""
    workspace = root / "workspace"
    copy_example(workspace / FOLDER)
    if prompt is not None:
        (workspace / PROMPT).write_text(prompt, encoding="utf-8")
    return workspace


def edit_config(workspace: Path, change: Callable[[dict[str, Any]], None]) -> None:
    path = workspace / FOLDER / "evalgate.yml"
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(config)
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")


def suite_of(config: dict[str, Any]) -> dict[str, Any]:
    suite: dict[str, Any] = config["suites"][SUITE]
    return suite


def use_anthropic(workspace: Path) -> None:
    def change(config: dict[str, Any]) -> None:
        suite_of(config)["model"] = {
            "backend": "anthropic",
            "name": "claude-haiku-4-5",
            "max_tokens": 64,
            "temperature": 0,
        }

    edit_config(workspace, change)


def example_tree() -> dict[str, str]:
    """The repository's files on the default branch: the example under its folder."""
    return {
        f"{FOLDER}/{p.relative_to(EXAMPLE).as_posix()}": p.read_text(encoding="utf-8")
        for p in sorted(EXAMPLE.rglob("*"))
        if p.is_file() and ".evalgate" not in p.parts
    }


@pytest.fixture
def gh() -> Iterator[GitHubServer]:
    with GitHubServer() as server:
        server.add_repo(REPO, files=example_tree())
        yield server


@pytest.fixture
def messages() -> Iterator[MessagesServer]:
    with MessagesServer(load_rules({"rules_file": "fake-rules.yml"}, EXAMPLE)) as server:
        yield server


def open_pull(
    gh: GitHubServer, files: Mapping[str, str | None], *, number: int = 7, fork: bool = False
) -> None:
    """A pull request whose head commit changes ``files`` (from a fork when ``fork``)."""
    if fork:
        gh.add_repo(FORK, fork_of=REPO)
        gh.add_commit(FORK, files, branch="feature")
        gh.add_pull(REPO, head="feature", head_repo=FORK, number=number, user="forker")
    else:
        gh.create_branch(REPO, "feature")
        gh.add_commit(REPO, files, branch="feature")
        gh.add_pull(REPO, head="feature", number=number)


def api(gh: GitHubServer, token: str | None = None) -> dict[str, str]:
    return {"github_token": token or gh.write_token}


def api_env(gh: GitHubServer) -> dict[str, str]:
    return {"GITHUB_API_URL": gh.url}


@pytest.fixture(scope="module")
def baseline_text(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The run file baseline mode makes for the unchanged example (made once)."""
    workspace = make_workspace(tmp_path_factory.mktemp("baseline"))
    job = run_action(workspace, "push", push_event(), ref="refs/heads/main")
    assert job.code == 0, job.out + job.err
    return Path(job.outputs["run_file"]).read_text(encoding="utf-8")


def doctored(text: str, **changes: Any) -> str:
    """The run file with fields replaced; ``wrong=True`` also makes every answer wrong."""
    data = json.loads(text)
    if changes.pop("wrong", False):
        for case in data["cases"]:
            for outcome in case["outcomes"]:
                outcome["answer"] = "nonsense"
                outcome["score"] = 0.0
    data.update(changes)
    return Run.model_validate(data).model_dump_json(indent=1)


def upload(
    gh: GitHubServer,
    text: str,
    *,
    event: str = "push",
    expired: bool = False,
    created_at: datetime | None = None,
) -> Artifact:
    """The baseline artefact, as the workflow's upload step makes it, from a run of ``event``."""
    run: WorkflowRun = gh.add_workflow_run(
        REPO, event=event, head_branch="main", created_at=created_at
    )
    return gh.add_artifact(REPO, ARTIFACT, files={f"{SUITE}.json": text}, run=run, expired=expired)


def comments(gh: GitHubServer, number: int = 7) -> list[str]:
    return [c.body for c in gh.comments(REPO, number)]


# --------------------------------------------------------------------------- 1. modes

BASE_ENV = {"GITHUB_REF": "refs/heads/main"}


@pytest.mark.parametrize(
    ("event", "ref", "mode_input", "expected"),
    [
        ("pull_request", "refs/pull/7/merge", "auto", "pr"),
        ("pull_request_target", "refs/heads/main", "auto", "pr"),
        ("push", "refs/heads/main", "auto", "baseline"),
        ("push", "refs/tags/v1.2.0", "auto", "release"),
        ("schedule", "refs/heads/main", "auto", "baseline"),
        ("workflow_dispatch", "refs/heads/main", "release", "release"),
        ("workflow_dispatch", "refs/heads/main", "baseline", "baseline"),
        ("workflow_dispatch", "refs/heads/main", "pr", "pr"),
        # The input wins over the event.
        ("push", "refs/tags/v1.2.0", "baseline", "baseline"),
    ],
)
def test_mode_comes_from_the_event_or_the_mode_input(
    event: str, ref: str, mode_input: str, expected: str
) -> None:
    inputs = Inputs.from_env({"INPUT_MODE": mode_input})
    env = {"GITHUB_EVENT_NAME": event, "GITHUB_REF": ref}
    assert detect_mode(inputs, env, push_event(), "v*") == expected


@pytest.mark.parametrize("name", ["pull_request", "pull_request_target"])
def test_a_closed_pull_request_keeps_its_spend_and_a_merged_one_is_left_to_its_merge(
    name: str,
) -> None:
    env = {"GITHUB_EVENT_NAME": name, "GITHUB_REF": "refs/heads/main"}
    event = pr_event()
    assert detect_mode(Inputs(), env, event, "v*") == "pr"
    event["action"] = "closed"
    event["pull_request"]["merged"] = False
    assert detect_mode(Inputs(), env, event, "v*") == "closed"
    event["pull_request"]["merged"] = True
    assert detect_mode(Inputs(), env, event, "v*") == "skip"


def test_baseline_follows_the_repositorys_default_branch() -> None:
    event = {"repository": {"full_name": REPO, "default_branch": "trunk"}}
    push = {"GITHUB_EVENT_NAME": "push", "GITHUB_REF": "refs/heads/trunk"}
    assert detect_mode(Inputs(), push, event, "v*") == "baseline"
    # A baseline made on another branch is never used: nothing is spent on it (and a workflow
    # triggered by every push is not an error).
    elsewhere = push | {"GITHUB_REF": "refs/heads/main"}
    assert detect_mode(Inputs(), elsewhere, event, "v*") == "skip"
    # The mode input still decides when it is given.
    assert detect_mode(Inputs(mode="baseline"), elsewhere, event, "v*") == "baseline"


def test_workflow_dispatch_without_a_mode_input_is_a_user_error() -> None:
    env = {"GITHUB_EVENT_NAME": "workflow_dispatch", "GITHUB_REF": "refs/heads/main"}
    with pytest.raises(UserError, match="mode input"):
        detect_mode(Inputs(), env, {}, "v*")


def test_schedule_runs_the_baseline(tmp_path: Path) -> None:
    job = run_action(make_workspace(tmp_path), "schedule", {}, ref="refs/heads/main")
    assert job.code == 0, job.out + job.err
    assert "baseline mode" in job.out
    assert Path(job.outputs["run_file"]).is_file()


def test_tag_outside_release_tags_stops_with_the_reason(tmp_path: Path) -> None:
    job = run_action(make_workspace(tmp_path), "push", push_event(), ref="refs/tags/nightly-3")
    assert job.code == 2
    [error] = job.annotations("error")
    assert "'nightly-3'" in error and "release_tags 'v*'" in error
    assert "'nightly-3' does not match" in job.summary
    assert "verdict" not in job.outputs


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("fail_on", "bogus"),
        ("fail_on", "fail,maybe"),
        ("mode", "nonsense"),
        ("comment", "perhaps"),
        ("comment_author", "bot<script>"),
    ],
)
def test_bad_inputs_stop_with_one_line_everywhere(tmp_path: Path, name: str, value: str) -> None:
    job = run_action(
        make_workspace(tmp_path),
        "pull_request",
        pr_event(),
        ref="refs/pull/7/merge",
        inputs={name: value},
    )
    assert job.code == 2
    [error] = job.annotations("error")
    assert f"input {name}" in error and repr(value.split(",")[-1]) in error
    # The cause is one line in the job summary too (Markdown-escaped), with nothing else there.
    [cause] = [line for line in job.summary.splitlines() if "evalgate stopped" in line]
    cause = cause.replace("\\", "")
    assert f"input {name}" in cause and value.split(",")[-1] in cause
    assert "Traceback" not in job.out + job.err + job.summary
    assert job.outputs == {}


# --------------------------------------------------------------------------- 2. baseline mode


def test_baseline_mode_writes_the_run_file_with_repeats_and_the_noise_floor(
    tmp_path: Path,
) -> None:
    workspace = make_workspace(tmp_path)
    edit_config(workspace, lambda c: suite_of(c)["gate"].update(baseline_repeats=3))
    job = run_action(workspace, "push", push_event(), ref="refs/heads/main")

    assert job.code == 0, job.out + job.err
    path = Path(job.outputs["run_file"])
    assert path == workspace / FOLDER / ".evalgate" / "baseline" / f"{SUITE}.json"
    run = read_run(path)
    assert run.suite == SUITE and run.prompt.name == "v3"
    assert {len(case.outcomes) for case in run.cases} == {3}
    assert {case.split for case in run.cases} == {"dev"}  # never the holdout
    assert job.outputs["verdict"] == "pass"
    assert 0 < float(job.outputs["accuracy"]) < 1
    assert "## evalgate baseline: bike-shop" in job.summary
    assert re.search(r"Noise floor: flip rate 0\.0% over 3 repeats", job.summary)
    assert "minimum detectable effect" in job.summary


# --------------------------------------------------------------------------- 3-5. the PR gate


def test_harmless_change_passes_with_one_comment_and_every_output(
    tmp_path: Path, gh: GitHubServer, baseline_text: str
) -> None:
    art = upload(gh, baseline_text)
    open_pull(gh, {PROMPT: HARMLESS})
    workspace = make_workspace(tmp_path, HARMLESS)
    job = pr_job(workspace, gh)

    assert job.code == 0, job.out + job.err
    out = job.outputs
    assert out["verdict"] == "pass"
    baseline = read_run_text(baseline_text)
    dev = [c for c in baseline.cases if c.split == "dev"]
    expected = sum(1 for c in dev if c.outcomes[0].score == 1.0) / len(dev)
    assert float(out["accuracy"]) == pytest.approx(expected, abs=1e-5)
    assert float(out["baseline_accuracy"]) == pytest.approx(expected, abs=1e-5)
    assert (out["fixed"], out["broken"], out["p_value"]) == ("0", "0", "1")
    # The example's cases carry scenario groups, so the MDE is over its 54 groups.
    assert 0 < float(out["mde"]) < 0.10
    [comment] = gh.comments(REPO, 7)
    assert comment.body.startswith(MARKER + "\n")
    assert out["comment_url"].endswith(f"#issuecomment-{comment.id}")
    assert "**bike-shop passed: not worse: the data rule out drops above " in comment.body
    downloads = gh.find_requests("GET", "/repos/*/actions/artifacts/*/zip")
    assert [r.path for r in downloads] == [f"/repos/{REPO}/actions/artifacts/{art.id}/zip"]
    assert not job.annotations("error")
    assert "bike-shop" in job.summary and MARKER not in job.summary


def read_run_text(text: str) -> Run:
    return Run.model_validate_json(text)


def test_breaking_change_fails_the_job_with_a_fail_comment(
    tmp_path: Path, gh: GitHubServer, baseline_text: str
) -> None:
    upload(gh, baseline_text)
    open_pull(gh, {PROMPT: NO_LABELS})
    job = pr_job(make_workspace(tmp_path, NO_LABELS), gh)

    assert job.code == 1, job.out + job.err
    assert job.outputs["verdict"] == "fail"
    assert int(job.outputs["broken"]) > 50 and job.outputs["fixed"] == "0"
    assert float(job.outputs["accuracy"]) < float(job.outputs["baseline_accuracy"]) - 0.5
    assert float(job.outputs["p_value"]) < 0.05
    [body] = comments(gh)
    assert "failed the gate" in body and "significantly worse" in body
    [error] = job.annotations("error")
    assert error.startswith("::error title=evalgate::bike-shop: FAIL: significantly worse")


def test_lost_json_format_fails(tmp_path: Path, gh: GitHubServer, baseline_text: str) -> None:
    upload(gh, baseline_text)
    open_pull(gh, {PROMPT: NO_JSON})
    job = pr_job(make_workspace(tmp_path, NO_JSON), gh)
    assert job.code == 1 and job.outputs["verdict"] == "fail"
    [body] = comments(gh)
    assert "failed the gate" in body and "format validity dropped" in body
    assert any("format validity dropped" in a for a in job.annotations("error"))


@pytest.mark.parametrize(("fail_on", "code"), [(None, 0), ("fail,inconclusive", 1), ("fail", 0)])
def test_inconclusive_fails_the_job_only_when_fail_on_says_so(
    tmp_path: Path, gh: GitHubServer, fail_on: str | None, code: int
) -> None:
    # No baseline artefact, and the config asks for "inconclusive" rather than a same-job run.
    open_pull(gh, {PROMPT: HARMLESS})
    workspace = make_workspace(tmp_path, HARMLESS)
    edit_config(workspace, lambda c: suite_of(c)["gate"].update(no_baseline="inconclusive"))
    inputs = api(gh) | ({"fail_on": fail_on} if fail_on else {})
    job = run_action(
        workspace,
        "pull_request",
        pr_event(),
        ref="refs/pull/7/merge",
        inputs=inputs,
        env=api_env(gh),
    )

    assert job.code == code, job.out + job.err
    assert job.outputs["verdict"] == "inconclusive"
    assert job.outputs["baseline_accuracy"] == ""
    [body] = comments(gh)
    assert "no baseline artefact for this suite was found" in body
    assert any("INCONCLUSIVE" in a for a in job.annotations("warning"))
    # "inconclusive" means no same-job run: the base branch's prompt was not fetched (its
    # config and cases were, for the split).
    assert not gh.find_requests("GET", f"/repos/{REPO}/contents/{PROMPT}")
    assert gh.find_requests("GET", f"/repos/{REPO}/contents/{FOLDER}/evalgate.yml")


def test_second_run_edits_the_comment_in_place(
    tmp_path: Path, gh: GitHubServer, baseline_text: str
) -> None:
    upload(gh, baseline_text)
    open_pull(gh, {PROMPT: HARMLESS})
    workspace = make_workspace(tmp_path, HARMLESS)
    first = pr_job(workspace, gh)
    assert first.code == 0, first.out + first.err
    # A new push: the PR now breaks the format, and the workflow run is another one.
    gh.add_commit(REPO, {PROMPT: NO_JSON}, branch="feature")
    (workspace / PROMPT).write_text(NO_JSON, encoding="utf-8")
    second = pr_job(workspace, gh, env={"GITHUB_RUN_ID": "43"})

    assert second.code == 1
    [comment] = gh.comments(REPO, 7)
    assert "failed the gate" in comment.body and "/actions/runs/43" in comment.body
    assert second.outputs["comment_url"] == first.outputs["comment_url"]
    assert len(gh.find_requests("POST", f"/repos/{REPO}/issues/7/comments")) == 1
    patches = gh.find_requests("PATCH", f"/repos/{REPO}/issues/comments/*")
    assert [r.path.rsplit("/", 1)[-1] for r in patches] == [str(comment.id)]


def test_comment_false_publishes_only_the_summary_and_outputs(
    tmp_path: Path, gh: GitHubServer, baseline_text: str
) -> None:
    upload(gh, baseline_text)
    open_pull(gh, {PROMPT: HARMLESS})
    job = pr_job(make_workspace(tmp_path, HARMLESS), gh, inputs={"comment": "false"})

    assert job.code == 0, job.out + job.err
    assert job.outputs["verdict"] == "pass" and "comment_url" not in job.outputs
    assert not gh.find_requests("GET", "*/comments")
    # Nothing is published; the only write is the job's spend, kept on the data branch (whose
    # creation is the one POST).
    assert [r.path for r in gh.find_requests("POST")] == [f"/repos/{REPO}/git/refs"]
    assert [r.path for r in gh.find_requests("PUT")] == [
        f"/repos/{REPO}/contents/evalgate/{SUITE}/spend.jsonl"
    ]
    assert "**bike-shop passed" in job.summary


# --------------------------------------------------------------------------- 6-7. the baseline


def test_planted_and_expired_artefacts_are_ignored(
    tmp_path: Path, gh: GitHubServer, baseline_text: str
) -> None:
    real = upload(gh, baseline_text)
    # Newer, same name, every answer wrong: the PR would look like a huge improvement.
    planted = upload(gh, doctored(baseline_text, wrong=True), event="pull_request")
    expired = upload(gh, doctored(baseline_text, wrong=True), expired=True)
    open_pull(gh, {PROMPT: HARMLESS})
    job = pr_job(make_workspace(tmp_path, HARMLESS), gh)

    assert job.code == 0, job.out + job.err
    assert job.outputs["fixed"] == "0"
    assert job.outputs["baseline_accuracy"] == job.outputs["accuracy"]
    downloads = {r.path for r in gh.find_requests("GET", "/repos/*/actions/artifacts/*/zip")}
    assert downloads == {f"/repos/{REPO}/actions/artifacts/{real.id}/zip"}
    assert {planted.id, expired.id}.isdisjoint({real.id})
    [body] = comments(gh)
    assert f"/actions/runs/{real.run_id}" in body


def test_without_a_usable_artefact_the_base_prompt_runs_in_the_same_job(
    tmp_path: Path, gh: GitHubServer, baseline_text: str
) -> None:
    upload(gh, doctored(baseline_text, wrong=True), event="pull_request")
    upload(gh, doctored(baseline_text, wrong=True), expired=True)
    base_sha = gh.branch_sha(REPO, "main")
    open_pull(gh, {PROMPT: NO_JSON})
    job = pr_job(make_workspace(tmp_path, NO_JSON), gh)

    # The base branch's prompt (with "JSON") was the baseline, so the lost format shows.
    assert job.code == 1, job.out + job.err
    assert job.outputs["verdict"] == "fail"
    assert job.outputs["baseline_accuracy"] == job.outputs["accuracy"]
    fetched = gh.find_requests("GET", f"/repos/{REPO}/contents/{PROMPT}")
    assert [r.query.get("ref") for r in fetched] == [[base_sha]]
    [body] = comments(gh)
    assert "format validity dropped" in body
    assert "computed in this job" in body and "ran the base branch's prompt" in body
    assert not gh.find_requests("GET", "/repos/*/actions/artifacts/*/zip")


def test_a_config_at_the_repository_top_reads_the_base_commit_through_the_api(
    tmp_path: Path,
) -> None:
    """The example at the repository's top, its cases named by a glob, and a checkout without
    the base commit: the base's files are found by listing the root through the git trees API
    (the contents API has no operation for the root: its path is required), then read."""

    def top(text: str) -> str:
        config = yaml.safe_load(text)
        config["suites"][SUITE]["cases"] = "case*.jsonl"
        return yaml.safe_dump(config, sort_keys=False)

    files = {p.removeprefix(f"{FOLDER}/"): t for p, t in example_tree().items()}
    files["evalgate.yml"] = top(files["evalgate.yml"])
    with GitHubServer() as gh:
        gh.add_repo(REPO, files=files)
        base_sha = gh.branch_sha(REPO, "main")
        gh.create_branch(REPO, "feature")
        gh.add_commit(REPO, {"prompts/v3.txt": NO_JSON}, branch="feature")
        gh.add_pull(REPO, head="feature", number=7)
        workspace = tmp_path / "workspace"
        copy_example(workspace)
        (workspace / "evalgate.yml").write_text(files["evalgate.yml"], encoding="utf-8")
        (workspace / "prompts" / "v3.txt").write_text(NO_JSON, encoding="utf-8")
        job = pr_job(workspace, gh, inputs={"working_directory": "."})

        assert job.outputs["verdict"] == "fail", job.out + job.err
        [body] = comments(gh)
        assert "format validity dropped" in body and "ran the base branch's prompt" in body
        listed = gh.find_requests("GET", f"/repos/{REPO}/git/trees/*")
        assert [r.path.rsplit("/", 1)[-1] for r in listed] == [base_sha]
        assert not gh.find_requests("GET", f"/repos/{REPO}/contents")
        assert not gh.find_requests("GET", f"/repos/{REPO}/contents/")
        fetched = gh.find_requests("GET", f"/repos/{REPO}/contents/cases.jsonl")
        assert [r.query.get("ref") for r in fetched] == [[base_sha]]


def test_stale_baseline_is_used_with_a_warning_and_an_annotation(
    tmp_path: Path, gh: GitHubServer, baseline_text: str
) -> None:
    old = datetime.now(UTC) - timedelta(days=30)
    upload(gh, doctored(baseline_text, created_at=old.isoformat()))
    open_pull(gh, {PROMPT: HARMLESS})
    job = pr_job(make_workspace(tmp_path, HARMLESS), gh)

    assert job.code == 0, job.out + job.err
    assert job.outputs["verdict"] == "pass"
    [body] = comments(gh)
    assert "the baseline is 30 days old" in body and "(30 days old)" in body
    assert any("30 days old" in a for a in job.annotations("warning"))


# --------------------------------------------------------------------------- 8. forks


def test_fork_without_a_key_runs_nothing_and_explains_the_safe_ways(
    tmp_path: Path, gh: GitHubServer, messages: MessagesServer
) -> None:
    open_pull(gh, {PROMPT: HARMLESS}, number=8, fork=True)
    workspace = make_workspace(tmp_path, HARMLESS)
    use_anthropic(workspace)
    job = run_action(
        workspace,
        "pull_request",
        pr_event(8, head_repo=FORK),
        ref="refs/pull/8/merge",
        inputs=api(gh, gh.read_token),
        env=api_env(gh) | {"ANTHROPIC_BASE_URL": messages.url},
    )

    assert job.code == 0, job.out + job.err
    assert job.outputs["verdict"] == "skipped"
    assert messages.requests == []
    assert not (workspace / FOLDER / ".evalgate").exists()  # no run, no cache, no download
    assert gh.comments(REPO, 8) == []
    assert not gh.find_requests("POST")
    assert any("fork" in a for a in job.annotations("warning"))
    summary = job.summary
    assert "was not evaluated" in summary and "Nothing was spent" in summary
    assert "workflow_run" in summary and "label" in summary.lower()
    # pull_request_target appears only as a warning, never as advice.
    for line in summary.splitlines():
        if "pull_request_target" in line:
            assert line.lstrip("> -").startswith("Never"), line


def test_fork_on_the_fake_backend_runs_but_does_not_comment(
    tmp_path: Path, gh: GitHubServer, baseline_text: str
) -> None:
    upload(gh, baseline_text)
    open_pull(gh, {PROMPT: HARMLESS}, number=8, fork=True)
    job = run_action(
        make_workspace(tmp_path, HARMLESS),
        "pull_request",
        pr_event(8, head_repo=FORK),
        ref="refs/pull/8/merge",
        inputs=api(gh, gh.read_token),
        env=api_env(gh),
    )

    assert job.code == 0, job.out + job.err
    assert job.outputs["verdict"] == "pass"
    assert "comment_url" not in job.outputs
    assert not gh.find_requests("POST", "*/comments")
    assert gh.comments(REPO, 8) == []
    assert any("fork" in a for a in job.annotations("notice"))
    assert "bike-shop" in job.summary


# --------------------------------------------------------------------------- 9. skip


def test_pr_that_touches_nothing_the_suite_reads_is_skipped(
    tmp_path: Path, gh: GitHubServer, messages: MessagesServer
) -> None:
    open_pull(gh, {"README.md": "# widgets, now with docs\n", "docs/notes.md": "notes\n"})
    workspace = make_workspace(tmp_path)
    use_anthropic(workspace)
    job = pr_job(
        workspace,
        gh,
        inputs={"anthropic_api_key": "sk-ant-test-key"},
        env={"ANTHROPIC_BASE_URL": messages.url},
    )

    assert job.code == 0, job.out + job.err
    assert job.outputs == {"verdict": "skipped"}
    [line] = [line for line in job.out.splitlines() if "skipped" in line]
    assert line.startswith("bike-shop: skipped")
    assert messages.requests == []
    assert not (workspace / FOLDER / ".evalgate").exists()
    assert gh.comments(REPO, 7) == [] and not gh.find_requests("POST")


# --------------------------------------------------------------------------- 10. GitHub faults


def test_read_only_token_on_comment_stops_with_permissions_advice(
    tmp_path: Path, gh: GitHubServer, baseline_text: str
) -> None:
    upload(gh, baseline_text)
    open_pull(gh, {PROMPT: HARMLESS})
    job = run_action(
        make_workspace(tmp_path, HARMLESS),
        "pull_request",
        pr_event(),
        ref="refs/pull/7/merge",
        inputs=api(gh, gh.read_token),
        env=api_env(gh),
    )

    assert job.code == 2, job.out + job.err
    [error] = job.annotations("error")
    assert "403" in error
    assert "pull-requests: write" in job.summary and "fork" in job.summary
    assert gh.comments(REPO, 7) == []
    assert [r.status for r in gh.find_requests("POST", "*/comments")] == [403]


def test_a_502_on_posting_the_comment_is_not_retried(
    tmp_path: Path, gh: GitHubServer, baseline_text: str
) -> None:
    upload(gh, baseline_text)
    open_pull(gh, {PROMPT: HARMLESS})
    gh.fail_next("POST", f"/repos/{REPO}/issues/7/comments", status=502)
    job = pr_job(make_workspace(tmp_path, HARMLESS), gh)

    assert job.code == 2, job.out + job.err
    assert [r.status for r in gh.find_requests("POST", "*/comments")] == [502]
    assert gh.pending_faults == 0
    assert "502" in job.summary and "re-run the job" in job.summary
    assert gh.comments(REPO, 7) == []


# --------------------------------------------------------------------------- 11. release


def holdout_cases(workspace: Path) -> list[tuple[str, str]]:
    """(id, message) of every holdout case of the example, as the split assigns them."""
    loaded = load_config(workspace / FOLDER / "evalgate.yml")
    _, suite = loaded.suite(SUITE)
    paths = loaded.expand(suite.cases, "case file")
    plain = load_cases(paths, suite.fields, root=loaded.root)
    cases = assign_all(list(plain.cases), suite.split)
    return [(c.id, str(c.input["message"])) for c in cases if c.split == "holdout"]


def release(gh: GitHubServer, root: Path, tag: str, prompt: str | None = None) -> Job:
    """A push of ``tag`` on a new commit of main, in a fresh checkout (as in CI)."""
    if prompt is not None:
        gh.add_commit(REPO, {PROMPT: prompt}, message=f"release {tag}")
    sha = gh.branch_sha(REPO, "main")
    assert sha is not None
    return run_action(
        make_workspace(root, prompt),
        "push",
        push_event(),
        ref=f"refs/tags/{tag}",
        inputs=api(gh),
        env=api_env(gh) | {"GITHUB_SHA": sha},
    )


def data_file(gh: GitHubServer, name: str) -> str:
    content = gh.file(REPO, f"evalgate/{SUITE}/{name}", ref=DATA_BRANCH)
    assert content is not None, f"{name} is not on the data branch"
    return content.decode("utf-8")


def test_release_keeps_history_and_ledger_on_the_data_branch(
    tmp_path: Path, gh: GitHubServer
) -> None:
    assert gh.branch_sha(REPO, DATA_BRANCH) is None
    first_sha = gh.branch_sha(REPO, "main")
    first = release(gh, tmp_path / "one", "v1.0.0")

    assert first.code == 0, first.out + first.err
    assert first.outputs["verdict"] == "pass"
    assert gh.branch_sha(REPO, DATA_BRANCH) is not None  # created
    history = json.loads(data_file(gh, "releases.json"))
    assert [r["name"] for r in history] == ["v1.0.0"]
    ledger = data_file(gh, "holdout-ledger.jsonl").splitlines()
    assert len(ledger) == 1 and json.loads(ledger[0])["purpose"] == "release"
    assert gh.find_requests("PUT", f"/repos/{REPO}/contents/evalgate/{SUITE}/releases.json")
    [check] = gh.check_runs(REPO)
    assert (check.head_sha, check.conclusion) == (first_sha, "success")
    assert check.name == f"evalgate release: {SUITE}"
    assert "v1.0.0" in first.summary

    # The next release breaks every "complaint" case: the holdout drops against v1.0.0.
    second = release(gh, tmp_path / "two", "v1.1.0", NO_LABELS)

    assert second.code == 1, second.out + second.err
    assert second.outputs["verdict"] == "fail"
    history = json.loads(data_file(gh, "releases.json"))
    assert [r["name"] for r in history] == ["v1.0.0", "v1.1.0"]
    ledger = data_file(gh, "holdout-ledger.jsonl").splitlines()
    assert len(ledger) == 2, "the second job must read the ledger back from the data branch"
    checks = gh.check_runs(REPO)
    assert [(c.head_sha, c.conclusion) for c in checks[1:]] == [
        (gh.branch_sha(REPO, "main"), "failure")
    ]
    assert "since v1.0.0" in second.summary
    assert any("release gate FAIL" in a for a in second.annotations("error"))

    # The holdout is reported in aggregate only: no case id or message anywhere public.
    hidden = holdout_cases(tmp_path / "one" / "workspace")
    assert len(hidden) > 40
    public = [first.summary, second.summary, first.out, second.out]
    public += [c.summary or "" for c in checks] + [c.text or "" for c in checks]
    for case_id, message in hidden:
        for text in public:
            assert not re.search(rf"\b{re.escape(case_id)}\b", text), case_id
            assert message not in text, message


# --------------------------------------------------------------------------- 12. crash


def test_a_crash_exits_1_with_its_cause_in_the_log_and_the_summary(tmp_path: Path) -> None:
    def connect(env: Mapping[str, str], inputs: Inputs) -> Any:
        raise RuntimeError("the network stack caught fire")

    job = run_action(
        make_workspace(tmp_path, HARMLESS),
        "pull_request",
        pr_event(),
        ref="refs/pull/7/merge",
        connect=connect,
    )

    assert job.code == 1
    [error] = job.annotations("error")
    assert "RuntimeError: the network stack caught fire" in error
    assert "RuntimeError: the network stack caught fire" in job.summary
    assert "Traceback" in job.err  # a bug keeps its traceback, in the log only
    assert "Traceback" not in job.summary


def test_audit_mode_reports_on_the_holdout_in_aggregate_only(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    job = run_action(
        workspace,
        "workflow_dispatch",
        {},
        ref="refs/heads/main",
        inputs={
            "mode": "audit",
            "candidate": "v3",
            "baseline_version": "v2",
            "fitted_score": "0.93",
            "searched": "400",
            "tuning_cases": "143",
        },
    )
    assert job.code == 0, job.out + job.err
    assert "evalgate audit" in job.summary and "Keep `v2`" in job.summary.replace(
        "Keep v2", "Keep `v2`"
    )
    assert "400 equal candidates" in job.summary
    # Both reads are in the job's ledger (kept outside the checkout, and on the data branch
    # when there is a token), and no holdout case shows anywhere.
    assert "(1 read of this holdout)" in job.err and "(2 reads of this holdout)" in job.err
    assert not (workspace / FOLDER / ".evalgate" / "holdout-ledger.jsonl").exists()
    for case_id, message in holdout_cases(workspace):
        assert case_id not in job.summary + job.out + job.err
        assert message not in job.summary + job.out + job.err
    assert job.outputs["verdict"] == "pass"


def test_audit_mode_keeps_its_reads_beside_the_releases_on_the_data_branch(
    tmp_path: Path, gh: GitHubServer
) -> None:
    first = release(gh, tmp_path / "one", "v1.0.0")
    assert first.code == 0, first.out + first.err
    job = run_action(
        make_workspace(tmp_path / "two"),
        "workflow_dispatch",
        {},
        ref="refs/heads/main",
        inputs=api(gh) | {"mode": "audit", "candidate": "v3", "baseline_version": "v2"},
        env=api_env(gh),
    )
    assert job.code == 0, job.out + job.err
    ledger = [json.loads(line) for line in data_file(gh, "holdout-ledger.jsonl").splitlines()]
    # The release's read, then the audit's two (candidate and baseline), in one file.
    assert [r["purpose"] for r in ledger] == ["release", "audit", "audit"]


def test_audit_mode_without_its_inputs_is_a_user_error(tmp_path: Path) -> None:
    job = run_action(
        make_workspace(tmp_path),
        "workflow_dispatch",
        {},
        ref="refs/heads/main",
        inputs={"mode": "audit"},
    )
    assert job.code == 2
    shown = job.summary.replace("\\", "")  # the summary escapes Markdown
    assert "audit mode needs the candidate and baseline_version inputs" in shown


def test_a_push_to_another_branch_does_nothing_and_says_why(tmp_path: Path) -> None:
    job = run_action(make_workspace(tmp_path), "push", push_event(), ref="refs/heads/feature")
    assert job.code == 0, job.out + job.err
    assert job.outputs == {"verdict": "skipped"}
    assert "baselines are made only from the default branch" in job.out


def test_with_several_suites_the_outputs_explain_the_worst_verdict(
    tmp_path: Path, gh: GitHubServer, baseline_text: str
) -> None:
    upload(gh, baseline_text)  # a baseline of bike-shop only
    open_pull(gh, {PROMPT: HARMLESS})
    workspace = make_workspace(tmp_path, HARMLESS)

    def add_second_suite(config: dict[str, Any]) -> None:
        second = json.loads(json.dumps(suite_of(config)))
        second["gate"] = {**second.get("gate", {}), "no_baseline": "inconclusive"}
        config["suites"]["second"] = second

    edit_config(workspace, add_second_suite)
    job = pr_job(workspace, gh)
    assert job.code == 0, job.out + job.err
    # bike-shop passes against its baseline; "second" has none (the artefact holds only
    # bike-shop's run, which must not stand in for another suite's): inconclusive, the worst.
    assert "second: the baseline artefact has no run of this suite (found bike-shop)" in job.out
    assert job.outputs["verdict"] == "inconclusive"
    assert job.outputs["baseline_accuracy"] == ""
    assert len(gh.comments(REPO, 7)) == 2
    # One decision for the pull request: the job summary leads with it, each comment names it
    # and this suite's part.
    assert "### Pull request: INCONCLUSIVE" in job.summary
    assert "| bike-shop | pass |" in job.summary and "| second | inconclusive |" in job.summary
    assert "pull request: INCONCLUSIVE (2 suites: 1 inconclusive, 1 pass; " in job.out
    for comment in gh.comments(REPO, 7):
        assert "**This pull request: INCONCLUSIVE** (2 suites, " in comment.body
        assert "bike-shop pass, second inconclusive). This suite's part:" in comment.body


# --------------------------------------------------------------------------- cost


def test_the_pr_job_estimates_first_and_the_comment_shows_cost_and_expected(
    tmp_path: Path, gh: GitHubServer, messages: MessagesServer
) -> None:
    key = {"anthropic_api_key": "sk-ant-test-key"}
    env = {"ANTHROPIC_BASE_URL": messages.url}
    # As the API: Haiku 4.5 caches no prompt prefix under 4,096 tokens (data/prices.json).
    messages.knobs = Knobs(cache_min_tokens=4096)
    base = make_workspace(tmp_path / "base")
    use_anthropic(base)
    made = run_action(base, "push", push_event(), ref="refs/heads/main", inputs=key, env=env)
    assert made.code == 0, made.out + made.err
    upload(gh, Path(made.outputs["run_file"]).read_text(encoding="utf-8"))
    open_pull(gh, {PROMPT: HARMLESS})
    workspace = make_workspace(tmp_path, HARMLESS)
    use_anthropic(workspace)
    messages.reset()
    job = pr_job(workspace, gh, inputs=key, env=env)

    assert job.code == 0, job.out + job.err
    # The estimate comes first: every token count before the first reply asked for.
    paths = [r.path for r in messages.requests]
    first = paths.index("/v1/messages")
    assert first > 0 and set(paths[:first]) == {"/v1/messages/count_tokens"}
    assert "/v1/messages/count_tokens" not in paths[first:]
    assert "Estimate · bike-shop on anthropic/claude-haiku-4-5, before any call" in job.out
    [comment] = comments(gh)
    [row] = [line for line in comment.splitlines() if "(expected $" in line]
    cost, expected = re.findall(r"\$([0-9.]+)", row.split("|")[-3])
    assert abs(float(expected) - float(cost)) <= 0.25 * float(cost)


def test_a_two_stage_pr_job_sends_the_second_stage_where_the_baseline_flipped(
    tmp_path: Path, gh: GitHubServer, baseline_text: str
) -> None:
    # The default branch's baseline with the second repeat of every seventh case flipped, as a
    # noisy model's would be; the fake model answers the same every time, so the second stage
    # goes to exactly the scenario groups holding those cases.
    data = json.loads(baseline_text)
    for case in data["cases"][::7]:
        case["outcomes"][1]["score"] = 1.0 - case["outcomes"][1]["score"]
    upload(gh, Run.model_validate(data).model_dump_json())
    open_pull(gh, {PROMPT: HARMLESS})
    workspace = make_workspace(tmp_path, HARMLESS)
    edit_config(workspace, lambda c: suite_of(c).setdefault("gate", {}).update(repeats="two-stage"))
    job = pr_job(workspace, gh)

    assert job.code in (0, 1), job.out + job.err
    flipped_groups = {c.get("group") or c["id"] for c in data["cases"][::7] if c["split"] == "dev"}
    dev_groups = {c.get("group") or c["id"] for c in data["cases"] if c["split"] == "dev"}
    # Announced by the estimate before any call, then by the run, then named in the comment.
    assert "two-stage repeats: " in job.out + job.err
    assert (
        f"two-stage repeats: {len(flipped_groups)} of {len(dev_groups)} scenario groups not "
        "settled after the first run"
    ) in job.out + job.err
    [body] = comments(gh)
    assert (
        f"two-stage repeats: {len(flipped_groups)} of {len(dev_groups)} scenario groups were "
        "not settled after the first candidate run"
    ) in body
