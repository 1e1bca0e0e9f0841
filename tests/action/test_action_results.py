"""The action's ``results`` input: another harness's results file gated on a pull request
against the default branch's artefact of the same format, and named as the baseline to upload
on the default branch. Driven in-process as tests/action/test_action.py drives the action, the
real PyGithub client against the GitHub stand-in; the files are promptfoo output and Inspect
logs in the shapes tests/foreign/test_foreign.py writes (its builders), and, when
scripts/harness-setup installed them, promptfoo's own output and inspect-ai's own .eval logs
(skipped without them, as tests/foreign/test_harness_runs.py is).
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from tests.action.test_action import (
    ARTIFACT,
    FOLDER,
    MARKER,
    REPO,
    api,
    api_env,
    comments,
    make_workspace,
    open_pull,
    pr_event,
    push_event,
    run_action,
)
from tests.foreign.test_foreign import (
    inspect_header,
    inspect_sample,
    pf_output,
    pf_result,
    write_eval,
)
from tests.foreign.test_harness_runs import run_inspect, run_promptfoo
from tests.support.github_server import GitHubServer

N = 50
WRONG = 6  # 12% of 50, as the harness tests
RESULTS = "promptfoo-results.json"
# promptfoo's config description names the cases' suite when there is no evalgate.yml.
PF_MARKER = "<!-- evalgate:suite=triage -->"


def promptfoo_text(wrong: int = 0, *, provider: str = "anthropic:messages:m") -> str:
    results = [pf_result(i, i >= wrong, provider=provider) for i in range(N)]
    return json.dumps(pf_output(results))


def bare_workspace(tmp_path: Path, text: str | None = None, name: str = RESULTS) -> Path:
    """A checkout with no evalgate.yml: only the results file an earlier step wrote."""
    workspace = tmp_path / "workspace"
    (workspace / FOLDER).mkdir(parents=True)
    if text is not None:
        (workspace / FOLDER / name).write_text(text, encoding="utf-8")
    return workspace


def upload_results(gh: GitHubServer, files: dict[str, str | bytes], *, event: str = "push") -> None:
    """The baseline artefact the default branch's upload step made (or, with another event,
    one a pull request's run planted under the same name)."""
    run = gh.add_workflow_run(REPO, event=event, head_branch="main")
    gh.add_artifact(REPO, ARTIFACT, files=files, run=run)


def pr_results_job(workspace: Path, gh: GitHubServer, **inputs: str) -> Any:
    event = pr_event()
    event["pull_request"]["head"]["sha"] = gh.branch_sha(REPO, "feature")
    return run_action(
        workspace,
        "pull_request",
        event,
        ref="refs/pull/7/merge",
        inputs=api(gh) | {"results": RESULTS} | inputs,
        env=api_env(gh),
    )


@pytest.fixture
def gh() -> Any:
    with GitHubServer() as server:
        server.add_repo(REPO, files={f"{FOLDER}/README.md": "results only\n"})
        yield server


# --------------------------------------------------------------------------- pull requests


def test_a_candidate_12_percent_worse_fails_with_the_comment_and_the_check(
    tmp_path: Path, gh: GitHubServer
) -> None:
    upload_results(gh, {RESULTS: promptfoo_text()})
    # A pull request's run uploads an artefact of the same name holding the candidate itself
    # (which would pass): it is never the baseline.
    upload_results(gh, {RESULTS: promptfoo_text(WRONG)}, event="pull_request")
    open_pull(gh, {f"{FOLDER}/promptfooconfig.yaml": "changed\n"})
    job = pr_results_job(bare_workspace(tmp_path, promptfoo_text(WRONG)), gh)

    assert job.code == 1, job.out + job.err
    out = job.outputs
    assert out["verdict"] == "fail"
    assert (out["broken"], out["fixed"]) == (str(WRONG), "0")
    # Independent arithmetic: 50 of 50 right before, 44 of 50 now.
    assert float(out["baseline_accuracy"]) == 1.0
    assert float(out["accuracy"]) == pytest.approx(44 / 50)
    [body] = comments(gh)
    assert body.startswith(PF_MARKER + "\n")
    assert "failed the gate" in body and "significantly worse" in body
    assert out["comment_url"]
    # No evalgate.yml: the defaults decided, and the report says so.
    assert "the gate's defaults decided" in job.summary.replace("\\", "")
    [check] = gh.check_runs(REPO)
    assert check.name == "evalgate" and check.conclusion == "failure"
    [error] = job.annotations("error")
    assert error.startswith("::error title=evalgate::triage: FAIL: significantly worse")


def test_an_unchanged_candidate_passes_and_a_second_push_edits_the_comment(
    tmp_path: Path, gh: GitHubServer
) -> None:
    upload_results(gh, {RESULTS: promptfoo_text()})
    open_pull(gh, {f"{FOLDER}/promptfooconfig.yaml": "changed\n"})
    workspace = bare_workspace(tmp_path, promptfoo_text())
    first = pr_results_job(workspace, gh)
    second = pr_results_job(workspace, gh)

    for job in (first, second):
        assert job.code == 0, job.out + job.err
        # 50 of 50 both times: not worse, but 50 cases cannot rule out a 5-point drop (the
        # same verdict as `evalgate gate` on the two files).
        assert job.outputs["verdict"] == "inconclusive"
        assert (job.outputs["broken"], job.outputs["fixed"]) == ("0", "0")
        assert not job.annotations("error")
    [body] = comments(gh)  # one comment, edited in place
    assert body.startswith(PF_MARKER + "\n") and "not shown to be worse" in body
    # The comment names the artefact the baseline came from, as for evalgate's own runs.
    assert "/actions/runs/" in body


def test_a_baseline_older_than_max_baseline_age_days_is_used_with_a_warning(
    tmp_path: Path, gh: GitHubServer
) -> None:
    # The file does not date itself (promptfoo's output): it is as old as its artefact.
    old = datetime.now(UTC) - timedelta(days=20)
    run = gh.add_workflow_run(REPO, event="push", head_branch="main", created_at=old)
    gh.add_artifact(REPO, ARTIFACT, files={RESULTS: promptfoo_text()}, run=run)
    open_pull(gh, {f"{FOLDER}/promptfooconfig.yaml": "changed\n"})
    job = pr_results_job(bare_workspace(tmp_path, promptfoo_text(WRONG)), gh)
    assert job.code == 1, job.out + job.err
    assert any("20 days old" in line for line in job.annotations("warning"))


def test_another_model_in_the_candidate_is_reported(tmp_path: Path, gh: GitHubServer) -> None:
    upload_results(gh, {RESULTS: promptfoo_text()})
    open_pull(gh, {f"{FOLDER}/promptfooconfig.yaml": "changed\n"})
    job = pr_results_job(bare_workspace(tmp_path, promptfoo_text(provider="openai:gpt-x")), gh)
    assert job.code == 0, job.out + job.err
    [body] = comments(gh)
    assert "openai:gpt-x" in body


def test_an_artefact_of_another_format_is_no_baseline(tmp_path: Path, gh: GitHubServer) -> None:
    archive = write_eval(
        tmp_path / "base.eval", inspect_header(), [inspect_sample(i, 1, "C") for i in range(5)]
    )
    upload_results(gh, {"base.eval": archive.read_bytes()})
    open_pull(gh, {f"{FOLDER}/promptfooconfig.yaml": "changed\n"})
    job = pr_results_job(bare_workspace(tmp_path, promptfoo_text()), gh)

    assert job.code == 0, job.out + job.err  # inconclusive fails only when fail_on says so
    assert job.outputs["verdict"] == "inconclusive"
    assert "holds no promptfoo results" in job.out
    [body] = comments(gh)
    assert body.startswith(PF_MARKER + "\n") and "inconclusive" in body.lower()


def test_inspect_logs_gate_against_an_inspect_artefact_by_a_glob(
    tmp_path: Path, gh: GitHubServer
) -> None:
    def samples(wrong: int) -> list[dict[str, Any]]:
        return [inspect_sample(i, e, "I" if i < wrong else "C") for i in range(N) for e in (1, 2)]

    base = write_eval(tmp_path / "2026-12-01_triage_abc.eval", inspect_header(), samples(0))
    # The artefact also holds a promptfoo file: the file of the candidate's format is taken.
    upload_results(gh, {base.name: base.read_bytes(), RESULTS: promptfoo_text(WRONG)})
    open_pull(gh, {f"{FOLDER}/task.py": "changed\n"})
    workspace = bare_workspace(tmp_path)
    logs = workspace / FOLDER / "logs"
    logs.mkdir()
    write_eval(logs / "2026-12-02_triage_def.eval", inspect_header(), samples(WRONG))
    job = pr_results_job(workspace, gh, results="logs/*.eval")

    assert job.code == 1, job.out + job.err
    assert job.outputs["verdict"] == "fail"
    assert job.outputs["broken"] == str(WRONG)
    [body] = comments(gh)
    assert body.startswith("<!-- evalgate:suite=triage -->\n")


def test_a_glob_that_names_several_files_is_one_line(tmp_path: Path, gh: GitHubServer) -> None:
    workspace = bare_workspace(tmp_path)
    logs = workspace / FOLDER / "logs"
    logs.mkdir()
    for name in ("a.eval", "b.eval"):
        write_eval(logs / name, inspect_header(), [inspect_sample(0, 1, "C")])
    job = pr_results_job(workspace, gh, results="logs/*.eval")
    assert job.code == 2
    [error] = job.annotations("error")
    assert "'logs/*.eval' matches 2 files (logs/a.eval, logs/b.eval)" in error
    assert "Traceback" not in job.out + job.err


def test_with_an_evalgate_yml_its_suite_names_the_comment_and_sets_the_gate(
    tmp_path: Path, gh: GitHubServer
) -> None:
    upload_results(gh, {RESULTS: promptfoo_text()})
    open_pull(gh, {f"{FOLDER}/promptfooconfig.yaml": "changed\n"})
    workspace = make_workspace(tmp_path)  # examples/bike-shop, with its evalgate.yml
    (workspace / FOLDER / RESULTS).write_text(promptfoo_text(WRONG), encoding="utf-8")
    job = pr_results_job(workspace, gh)

    assert job.code == 1, job.out + job.err
    [body] = comments(gh)
    assert body.startswith(MARKER + "\n")  # the suite bike-shop
    assert "the gate's defaults decided" not in job.summary.replace("\\", "")


# --------------------------------------------------------------------------- the default branch


def test_a_push_to_the_default_branch_names_the_file_as_the_baseline(tmp_path: Path) -> None:
    workspace = bare_workspace(tmp_path, promptfoo_text(WRONG))
    job = run_action(
        workspace, "push", push_event(), ref="refs/heads/main", inputs={"results": RESULTS}
    )
    assert job.code == 0, job.out + job.err
    assert Path(job.outputs["run_file"]) == workspace / FOLDER / RESULTS
    assert job.outputs["verdict"] == "pass"
    assert float(job.outputs["accuracy"]) == pytest.approx(44 / 50)
    assert "## evalgate baseline: triage (promptfoo)" in job.summary


def test_a_truncated_file_on_the_default_branch_stops_with_one_line(tmp_path: Path) -> None:
    text = promptfoo_text()
    workspace = bare_workspace(tmp_path, text[: len(text) // 2])
    job = run_action(
        workspace, "push", push_event(), ref="refs/heads/main", inputs={"results": RESULTS}
    )
    assert job.code == 2
    [error] = job.annotations("error")
    assert RESULTS in error and "truncated" in error
    assert "run_file" not in job.outputs


def test_an_unfinished_inspect_run_is_no_baseline(tmp_path: Path) -> None:
    workspace = bare_workspace(tmp_path)
    write_eval(
        workspace / FOLDER / "log.eval", inspect_header("cancelled"), [inspect_sample(0, 1, "C")]
    )
    job = run_action(
        workspace, "push", push_event(), ref="refs/heads/main", inputs={"results": "log.eval"}
    )
    assert job.code == 1
    assert job.outputs["verdict"] == "fail"
    [error] = job.annotations("error")
    assert "did not finish" in error


def test_a_missing_file_is_one_line_naming_it(tmp_path: Path) -> None:
    job = run_action(
        bare_workspace(tmp_path),
        "push",
        push_event(),
        ref="refs/heads/main",
        inputs={"results": RESULTS},
    )
    assert job.code == 2
    [error] = job.annotations("error")
    assert "names no file" in error and RESULTS in error


def test_a_closed_pull_request_with_the_results_input_is_skipped(
    tmp_path: Path, gh: GitHubServer
) -> None:
    # Gating results spends nothing: a closed pull request has nothing to decide or to keep.
    upload_results(gh, {RESULTS: promptfoo_text()})
    open_pull(gh, {f"{FOLDER}/promptfooconfig.yaml": "changed\n"})
    event = pr_event()
    event["action"] = "closed"
    event["pull_request"]["merged"] = False
    job = run_action(
        bare_workspace(tmp_path, promptfoo_text(WRONG)),
        "pull_request",
        event,
        ref="refs/pull/7/merge",
        inputs=api(gh) | {"results": RESULTS},
        env=api_env(gh),
    )
    assert job.code == 0, job.out + job.err
    assert job.outputs["verdict"] == "skipped"
    assert "nothing to do for pull request #7, closed" in job.out
    assert gh.comments(REPO, 7) == []


def test_the_results_input_in_release_mode_is_a_user_error(tmp_path: Path) -> None:
    job = run_action(
        bare_workspace(tmp_path, promptfoo_text()),
        "push",
        push_event(),
        ref="refs/tags/v1.0.0",
        inputs={"results": RESULTS},
    )
    assert job.code == 2
    [error] = job.annotations("error")
    assert "release mode runs evalgate's own suites" in error


def test_results_made_on_the_default_branch_are_the_next_pull_requests_baseline(
    tmp_path: Path, gh: GitHubServer
) -> None:
    """The round trip: the push job's run_file, uploaded as the workflow's step does, is what
    the pull request's job finds."""
    push = run_action(
        bare_workspace(tmp_path / "main", promptfoo_text()),
        "push",
        push_event(),
        ref="refs/heads/main",
        inputs={"results": RESULTS},
    )
    made = Path(push.outputs["run_file"])
    upload_results(gh, {made.name: made.read_text(encoding="utf-8")})
    open_pull(gh, {f"{FOLDER}/promptfooconfig.yaml": "changed\n"})
    job = pr_results_job(bare_workspace(tmp_path / "pr", promptfoo_text(WRONG)), gh)
    assert job.code == 1, job.out + job.err
    assert job.outputs["broken"] == str(WRONG)


def test_promptfoos_own_output_through_the_action(tmp_path: Path, gh: GitHubServer) -> None:
    """Real files: promptfoo (scripts/harness-setup) run against the Messages stand-in on the
    default branch and on a pull request whose model answers 6 of 50 wrongly."""
    base = run_promptfoo(tmp_path, 0, "base")
    worse = run_promptfoo(tmp_path, WRONG, "worse")
    checkout = bare_workspace(tmp_path / "main", base.read_text(encoding="utf-8"))
    push = run_action(
        checkout, "push", push_event(), ref="refs/heads/main", inputs={"results": RESULTS}
    )
    assert push.code == 0, push.out + push.err
    made = Path(push.outputs["run_file"])
    upload_results(gh, {made.name: made.read_bytes()})
    open_pull(gh, {f"{FOLDER}/promptfooconfig.yaml": "changed\n"})
    job = pr_results_job(bare_workspace(tmp_path / "pr", worse.read_text(encoding="utf-8")), gh)
    assert job.code == 1, job.out + job.err
    assert (job.outputs["verdict"], job.outputs["broken"]) == ("fail", str(WRONG))
    [body] = comments(gh)
    assert body.startswith(PF_MARKER + "\n") and "failed the gate" in body


def test_the_comments_reproduce_lines_fetch_an_inspect_baseline_and_gate_it(
    tmp_path: Path, gh: GitHubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`evalgate baseline pull` copies the artefact's .eval log too, where the comment's
    `evalgate gate --baseline` line looks for it."""
    samples = [inspect_sample(i, 1, "C") for i in range(N)]
    base = write_eval(tmp_path / "log.eval", inspect_header(), samples)
    upload_results(gh, {"log.eval": base.read_bytes()})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GITHUB_TOKEN", gh.write_token)
    monkeypatch.setenv("GITHUB_API_URL", gh.url)
    out, err = io.StringIO(), io.StringIO()
    code = main(["baseline", "pull", "--repo", REPO, "--artifact", ARTIFACT], out=out, err=err)
    assert code == 0, out.getvalue() + err.getvalue()
    pulled = tmp_path / ".evalgate" / "baseline" / "log.eval"
    assert pulled.read_bytes() == base.read_bytes()
    code = main(["gate", "--baseline", str(pulled), "--candidate", str(base)], out=out, err=err)
    assert code == 0, out.getvalue() + err.getvalue()


def test_inspects_own_eval_logs_through_the_action_by_a_glob(
    tmp_path: Path, gh: GitHubServer
) -> None:
    """Real files: the zstd-compressed .eval logs inspect-ai writes (scripts/harness-setup),
    named by a glob as a workflow must (Inspect puts the time in the log's name)."""
    base = run_inspect(tmp_path, 0, "base", log_format="eval")
    worse = run_inspect(tmp_path, WRONG, "worse", log_format="eval")
    checkout = bare_workspace(tmp_path / "main")
    (checkout / FOLDER / "logs").mkdir()
    (checkout / FOLDER / "logs" / base.name).write_bytes(base.read_bytes())
    push = run_action(
        checkout, "push", push_event(), ref="refs/heads/main", inputs={"results": "logs/*.eval"}
    )
    assert push.code == 0, push.out + push.err
    made = Path(push.outputs["run_file"])
    upload_results(gh, {made.name: made.read_bytes()})
    open_pull(gh, {f"{FOLDER}/task.py": "changed\n"})
    pr = bare_workspace(tmp_path / "pr")
    (pr / FOLDER / "logs").mkdir()
    (pr / FOLDER / "logs" / worse.name).write_bytes(worse.read_bytes())
    job = pr_results_job(pr, gh, results="logs/*.eval")
    assert job.code == 1, job.out + job.err
    assert (job.outputs["verdict"], job.outputs["broken"]) == ("fail", str(WRONG))
    [body] = comments(gh)
    assert body.startswith("<!-- evalgate:suite=triage -->\n") and "failed the gate" in body


@pytest.mark.parametrize("how", ["link", "absolute"])
def test_a_results_file_outside_the_checkout_is_not_read(
    tmp_path: Path, gh: GitHubServer, how: str
) -> None:
    """The results input is the pull request's: a link (or a path) to a file of the runner's
    outside the checkout is refused before a byte of it is read."""
    secret = tmp_path / "outside" / "results.json"
    secret.parent.mkdir()
    secret.write_text(promptfoo_text(), encoding="utf-8")
    workspace = bare_workspace(tmp_path)
    if how == "link":
        (workspace / FOLDER / RESULTS).symlink_to(secret)
        results = RESULTS
    else:
        results = str(secret)
    job = pr_results_job(workspace, gh, results=results)
    assert job.code == 2, job.out + job.err
    [error] = job.annotations("error")
    assert "is outside the repository" in error
    assert "Traceback" not in job.out + job.err
