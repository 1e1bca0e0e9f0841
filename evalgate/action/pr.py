"""Pull-request modes: the gate against the baseline, one comment, the check run; ``collect``
(a fork's changed files packed as data) and ``fork`` (their verdict on the base repository)."""

from __future__ import annotations

import os
import posixpath
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evalgate.action.baseline import Baseline, find_baseline_run, with_candidate
from evalgate.action.fork import MANIFEST, Refused, collect, overlay, read_manifest
from evalgate.action.inputs import VerdictKind, output_number
from evalgate.action.job import ActionJob, pr_number
from evalgate.action.judge import judge_in_pr
from evalgate.action.ledger import pull_ledger, push_ledger
from evalgate.action.modes import suites_to_run
from evalgate.action.spend import keep_spend
from evalgate.analysis.pricing import Usage
from evalgate.analysis.summary import summarise
from evalgate.app import (
    RunOptions,
    estimate_version,
    run_two_stage,
    run_version,
)
from evalgate.cases.base_split import (
    BaseSplit,
    BaseUnavailable,
    Tree,
    guard,
    read_tree,
    relative_config,
)
from evalgate.cases.gitrepo import GitTree, toplevel
from evalgate.cases.judge_labels import Label, load_labels
from evalgate.cases.leakguard import LeakGuard, LeakGuards, base_guards
from evalgate.cases.read import CaseSet
from evalgate.config.load import LoadedConfig
from evalgate.config.models import Suite
from evalgate.defaults import DATA_BRANCH
from evalgate.errors import UserError
from evalgate.gate.decide import decide
from evalgate.gate.pull_request import PullRequestVerdict, decide_pull_request
from evalgate.gate.verdict import PairedCase, Verdict
from evalgate.publish import github as gh
from evalgate.report.comment import (
    BaselineProvenance,
    CommentContext,
    CommentFlags,
    CommentLinks,
    marker,
    render_comment,
    render_job_summary,
)
from evalgate.report.escape import escape, one_line
from evalgate.report.render import render_model
from evalgate.running.allocation import candidate_repeats
from evalgate.running.budget import BudgetGuard
from evalgate.running.estimate import Estimate
from evalgate.running.suite import Prompt, load_suite_cases, sha256_text
from evalgate.runs.schema import Run
from evalgate.runs.spend import (
    SpendRecord,
    judge_check_part,
    ledger_block,
    spend_of,
    with_ledger,
)


@dataclass(frozen=True)
class PendingSuite:
    """A suite of a pull request that ran and has its own verdict, not yet published: the
    pull request's verdict (one familywise alpha over every suite) comes first."""

    name: str
    suite: Suite
    candidate: Run
    verdict: Verdict
    found: Baseline
    number: int
    version: str
    fork: bool
    # The judge's agreement section of the comment (suites with labels).
    judge: str | None = None
    # What the candidate's run was expected to cost, before it started.
    estimate: Estimate | None = None
    # What the job spent on the suite: the comment's ledger carries it to the default branch.
    spent: tuple[SpendRecord, ...] = ()


def read_pr_base(runner: ActionJob, loaded: LoadedConfig) -> BaseSplit:
    """The pull request's base commit's split: read through git (fetching the one commit a
    shallow checkout lacks), else through the contents API; never the head's own."""
    pr = runner.event.get("pull_request") or {}
    sha = (pr.get("base") or {}).get("sha")
    if not sha and runner.repo is not None:
        sha = gh.pull_request_info(runner.repo, pr_number(runner.event)).base_sha
    if not isinstance(sha, str) or not sha:
        raise BaseUnavailable(
            "the event names no base commit, so the default branch's split cannot be read",
            fix="run pr mode on pull_request events",
        )
    top = runner.workspace
    # The config's path as the inputs name it, not as resolved: a symbolic link is refused.
    config = relative_config(top, top / runner.inputs.working_directory / runner.inputs.config)
    tree: Tree
    try:
        tree = GitTree.open(toplevel(top) or top, sha, fetch=True)
    except BaseUnavailable as exc:
        if runner.repo is None:
            raise BaseUnavailable(
                f"{exc.what}, and there is no github_token to read it through the API",
                fix="pass github_token to the action, or check out with fetch-depth: 0",
            ) from None
        tree = gh.ContentsTree(runner.repo, sha)
    base = read_tree(tree, config, loaded)
    runner.leak_guards = leak_guards(base, tree, config)
    return base


def leak_guards(base: BaseSplit, tree: Tree | None = None, config: str = "") -> LeakGuards:
    """The job's holdout guards: the base's holdout cases and its judges' holdout labels (read
    from the base commit), less what its public cases and dev labels already carry."""
    holdout_labels: list[Label] = []
    dev_labels: list[Label] = []
    for name, own in base.suites.items():
        judge = own.suite.judge
        if tree is None or judge is None:
            continue
        path = posixpath.normpath(posixpath.join(posixpath.dirname(config), judge.labels))
        data = tree.read(path) if not path.startswith("../") else None
        if data is None:
            continue
        with tempfile.TemporaryDirectory(prefix="evalgate-base-labels-") as folder:
            copy = Path(folder) / posixpath.basename(path)
            copy.write_bytes(data)
            try:
                labels = load_labels(copy, own.suite)
            except UserError as exc:
                raise BaseUnavailable(
                    f"the base commit's judge labels of suite {name!r} cannot be read: {exc.what}",
                    fix="fix the labels on the default branch first",
                ) from None
        holdout_labels += [x for x in labels if x.split == "holdout"]
        dev_labels += [x for x in labels if x.split != "holdout"]
    public = [c for s in base.suites.values() for c in s.public]
    return base_guards(base.holdout, public, holdout_labels, dev_labels)


def run_pr(
    runner: ActionJob,
    loaded: LoadedConfig,
    name: str,
    suite: Suite,
    base: BaseSplit | BaseUnavailable,
) -> PendingSuite | None:
    number = pr_number(runner.event)
    fork = runner.read_only
    # A fork's token is read-only: it can write no check run (nor a comment).
    runner.check = runner.check or not fork
    pull = gh.pull_request_info(runner.repo, number) if runner.repo is not None else None
    if pull is not None:
        touched = {(runner.workspace / p).resolve() for p in pull.changed_files}
        if not touched & set(loaded.dependencies(suite)):
            runner.log(
                f"{name}: skipped, the pull request changes none of its prompts, cases or config"
            )
            runner.add_summary(
                f"**{escape(name, 'markdown')}**: skipped (the pull request changes none of "
                "its files).\n"
            )
            runner.verdicts.append("skipped")
            return None
    offline = suite.model.backend == "fake"
    if not offline and not runner.inputs.anthropic_api_key.get_secret_value() and fork:
        _fork_notice(runner, name, number)
        return None

    if isinstance(base, BaseUnavailable):
        _stopped(runner, name, number, base.one_line())
        return None
    assign, holdout_change = guard(base, name, loaded)
    version = loaded.ship_version(suite)
    if runner.leak_guards is None:
        runner.leak_guards = leak_guards(base)
    guards = runner.leak_guards
    options = RunOptions(
        cache=True, assign=assign, budget_parent=job_budget(runner), guard=guards.runs
    )
    merge = (
        gh.merge_base(runner.repo, pull.base_ref, pull.head_sha)
        if runner.repo is not None and pull is not None
        else None
    )
    # The baseline first: its replies tell the estimate, made before any call, what to expect.
    found = find_baseline_run(runner, loaded, name, suite, None, merge)
    repeats, adaptive = candidate_repeats(suite.gate, found.allocation)
    options = replace(options, repeats=repeats, adaptive=adaptive)
    estimate = estimate_version(runner.world(), loaded, name, version, options, found.run)
    runner.log(render_model("estimate", estimate, "text").rstrip())
    if suite.gate.repeats == "two-stage":
        candidate = run_two_stage(runner.world(), loaded, name, version, options, found.run)
    else:
        candidate = run_version(runner.world(), loaded, name, version, options)
    found = with_candidate(found, candidate)
    change = holdout_change()
    leak = guards.leak()
    if leak is None and found.run is None and suite.gate.no_baseline == "run" and pull is not None:
        found = _baseline_in_job(
            runner, loaded, name, suite, version, pull.base_sha, assign, options.guard
        )
        leak = guards.leak()
    verdict = decide(found.run, candidate, suite.gate)
    runner.annotations += _broken_annotations(runner, loaded, suite, assign, verdict)
    if change.changed:
        # The job ran on the default branch's split, which is safe; but a change of the
        # holdout is for the default branch to make, after review: it cannot pass here.
        verdict = verdict.model_copy(update={"mismatch": [change.line(), *verdict.mismatch]})
        runner.must_fail = (
            "this pull request changes the holdout, which is decided on the default branch: "
            "the job fails whatever fail_on says (see the comment)"
        )
    if leak is not None:
        # A request carried a holdout case: it was not sent, nor anything after it. What was
        # scored before stays in the run; the job cannot pass.
        _leaked(runner, name, leak)
        verdict = verdict.model_copy(update={"mismatch": [leak.what, *verdict.mismatch]})
    judge = None
    if suite.judge is not None and leak is None:
        # The judge, checked against its labels and, when the PR changed it, against the base's.
        base_sha = pull.base_sha if pull is not None else None

        def read_base(path: Path) -> str | None:
            if runner.repo is None or base_sha is None:
                return None
            relative = path.resolve().relative_to(runner.workspace.resolve()).as_posix()
            return gh.read_data_file(runner.repo, base_sha, relative)

        # A read of the holdout labels is kept in the suite's ledger on the data branch, like
        # a release's read of the holdout: a job that cannot write there reads dev only.
        keep = runner.repo is not None and not runner.read_only
        pulled = pull_ledger(runner, loaded, name) if keep else None
        unread = None if keep else "this job's token cannot record the read"
        judge = judge_in_pr(
            runner.world(),
            loaded,
            name,
            suite,
            read_base,
            candidate,
            holdout_unread=unread,
            guard=guards.judge_check,
        )
        leak = guards.judge_check.leak()
        if leak is not None:
            _leaked(runner, name, leak)
            judge.doubts.insert(0, leak.what)
        if keep:
            try:
                push_ledger(runner, loaded, name, pulled, f"evalgate: judge labels read for {name}")
            except gh.GitHubError as exc:
                line = (
                    f"{name}: the judge's holdout labels were read, but the read could not be kept "
                    f"on the {DATA_BRANCH} branch ({exc.what}): give the pull-request job "
                    "contents: write, or every read of them goes uncounted"
                )
                runner.must_fail = f"{runner.must_fail}; {line}" if runner.must_fail else line
                judge.markdown += f"\n> [!CAUTION]\n> {escape(line, 'markdown')}\n"
        # Settled with the pull request's other tests (decide_pull_request): a judge that
        # cannot be read makes the suite inconclusive, a judge that got worse fails it.
        verdict = verdict.model_copy(
            update={
                "mismatch": [*judge.doubts, *verdict.mismatch],
                "rule_failures": [*judge.failures, *verdict.rule_failures],
            }
        )
    spent = [spend_of(candidate, "pr", pull_request=number)]
    if judge is not None and judge.report.calls:
        usage = Usage(
            input_tokens=judge.report.input_tokens, output_tokens=judge.report.output_tokens
        )
        spent[0].parts.append(judge_check_part(judge.report.judge, judge.report.calls, usage))
    if found.run is not None and found.provenance and found.provenance.source == "same job":
        spent.append(spend_of(found.run, "pr", pull_request=number))
    keep_spend(runner, name, spent, expect_write=False)
    markdown = judge.markdown if judge else None
    return PendingSuite(
        name,
        suite,
        candidate,
        verdict,
        found,
        number,
        version,
        fork,
        markdown,
        estimate,
        tuple(spent),
    )


def _leaked(runner: ActionJob, name: str, leak: UserError) -> None:
    line = f"{name}: {leak.one_line()}"
    runner.must_fail = f"{runner.must_fail}; {line}" if runner.must_fail else line


def job_budget(runner: ActionJob) -> BudgetGuard | None:
    """The job's total budget (inputs max_calls, max_usd), made once and shared by its suites."""
    inputs = runner.inputs
    if runner.budget is None and (inputs.max_calls is not None or inputs.max_usd is not None):
        runner.budget = BudgetGuard(inputs.max_calls, inputs.max_usd, None, "the job's ")
    return runner.budget


def publish_pull_request(
    runner: ActionJob, pending: list[PendingSuite]
) -> list[tuple[VerdictKind, dict[str, str]]]:
    """Settle every suite with one familywise alpha, then publish each; (kind, outputs) each."""
    decision = decide_pull_request([(p.name, p.verdict) for p in pending])
    if len(pending) > 1:
        runner.log(decision.line())
        rows = "".join(
            f"| {escape(s.suite, 'markdown')} | {s.verdict.kind} |\n" for s in decision.suites
        )
        runner.add_summary(
            f"### Pull request: {decision.kind.upper()}\n\n{len(pending)} suites; "
            f"{decision.tests} tests share one familywise alpha of {decision.alpha:g} "
            f"(weighted Holm).\n\n| suite | verdict |\n|---|---|\n{rows}"
        )
    results: list[tuple[VerdictKind, dict[str, str]]] = []
    for p, part in zip(pending, decision.suites, strict=True):
        runner.outputs.values = {}
        publish_pr(runner, p, part.verdict, decision if len(pending) > 1 else None)
        results.append((part.verdict.kind, dict(runner.outputs.values)))
    return results


def _baseline_in_job(
    runner: ActionJob,
    loaded: LoadedConfig,
    name: str,
    suite: Suite,
    version: str,
    base_sha: str,
    assign: Callable[[CaseSet], CaseSet],
    leak_guard: LeakGuard | None = None,
) -> Baseline:
    """No artefact: run the base branch's prompt here (twice the cost, and the comment says so)."""
    path = loaded.prompt_files(suite)[version]
    relative = path.resolve().relative_to(runner.workspace.resolve()).as_posix()
    text = gh.read_data_file(runner.repo, base_sha, relative)
    if text is None:
        runner.log(f"{name}: {relative} does not exist on the base branch; no baseline")
        return Baseline(None, None, no_baseline=True)
    prompt = Prompt(name=version, text=text, path=relative)
    options = RunOptions(cache=True, prompt=prompt, assign=assign, guard=leak_guard)
    run = run_version(runner.world(), loaded, name, version, options)
    provenance = BaselineProvenance(
        run=run.name,
        commit=base_sha,
        age_days=0.0,
        created_at=run.created_at,
        model=f"{run.model.backend}/{run.model.name}",
        prompt_sha=sha256_text(text)[:12],
        cases_sha=run.cases_sha256[:12],
        source="same job",
    )
    return Baseline(run, provenance)


def run_collect(runner: ActionJob, loaded: LoadedConfig) -> int:
    """A fork's unprivileged job: pack the pull request's changed files under the suite's
    folder as data for the base repository's ``workflow_run`` job; runs nothing, spends
    nothing, needs no secret (a read-only token lists the changed files)."""
    number = pr_number(runner.event)
    if runner.repo is None:
        raise UserError(
            "collect mode lists the pull request's changed files through the API",
            fix="pass github_token (a fork's read-only token is enough)",
        )
    pull = gh.pull_request_info(runner.repo, number)
    head = ((runner.event.get("pull_request") or {}).get("head") or {}).get("sha")
    folder = Path(os.path.relpath(loaded.root, runner.workspace)).as_posix()
    data = collect(runner.workspace, folder, pull.changed_files, number, head or pull.head_sha)
    path = loaded.state_dir / "fork" / MANIFEST
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data.model_dump_json(), encoding="utf-8")
    runner.log(
        f"packed {len(data.files)} changed files of pull request #{number} for the base "
        f"repository's evalgate job: {path} (nothing was run)"
    )
    runner.add_summary(
        f"evalgate packed {len(data.files)} changed files of this pull request as data; the "
        "base repository's workflow_run job checks them and posts the verdict.\n"
    )
    runner.outputs.set("data_file", path)
    runner.outputs.set("verdict", "skipped")
    runner.flush()
    return 0


def prepare_fork(runner: ActionJob, loaded: LoadedConfig) -> bool:
    """workflow_run, in the base repository: the fork's data onto the default branch's
    checkout, and the event made the pull request's; False (with the refusal published) when
    the data asks for what only the default branch may change."""
    run = runner.event.get("workflow_run") or {}
    run_id, head = run.get("id"), run.get("head_sha")
    if run.get("event") != "pull_request" or not isinstance(run_id, int) or not head:
        raise UserError(
            "fork mode runs on the workflow_run event of a pull_request workflow",
            fix="trigger the job with `on: workflow_run: {workflows: [...], types: [completed]}`",
        )
    if runner.repo is None:
        raise UserError("fork mode needs github_token", fix="pass secrets.GITHUB_TOKEN")
    ref = gh.find_run_artifact(runner.repo, run_id, runner.inputs.fork_artifact)
    if ref is None:
        raise UserError(
            f"workflow run {run_id} has no artefact named {runner.inputs.fork_artifact!r}",
            fix="the pull_request workflow must run mode: collect and upload its data_file",
        )
    folder = gh.download_artifact(
        ref, runner.inputs.github_token.get_secret_value(), loaded.state_dir / "download"
    )
    data = read_manifest(folder / MANIFEST)
    pull = gh.pull_request_info(runner.repo, data.pull_request)
    if data.head_sha != head or pull.head_sha != head:
        raise Refused(
            f"the fork's data names pull request #{data.pull_request} at {data.head_sha[:12]}, "
            f"but this run was for {str(head)[:12]} (the pull request's head is "
            f"{pull.head_sha[:12]}): refused",
        )
    runner.event = {
        "pull_request": {
            "number": pull.number,
            "head": {"sha": head, "ref": pull.head_ref, "repo": {"full_name": pull.head_repo}},
            "base": {
                "sha": pull.base_sha,
                "ref": pull.base_ref,
                "repo": {"full_name": pull.base_repo},
            },
        },
        "repository": runner.event.get("repository") or {},
    }
    runner.fork_data = True
    try:
        written = overlay(data, runner.workspace, loaded)
    except Refused as exc:
        for name, _ in suites_to_run(loaded, runner.inputs.suite):
            _stopped(runner, name, pull.number, exc.one_line(), refused=True)
        runner.must_fail = f"the fork's pull request was refused: {exc.what}"
        runner.outputs.set("verdict", "fail")
        runner.check = True
        publish_check(runner, "fail")
        runner.annotate("error", runner.must_fail)
        return False
    runner.log(
        f"fork pull request #{pull.number}: {len(written)} changed prompt and case files laid "
        "onto the default branch's checkout, as data"
    )
    return True


def _stopped(
    runner: ActionJob, name: str, number: int, reason: str, *, refused: bool = False
) -> None:
    """Nothing ran: the base's split is unknown (or a fork's data was refused), so no case is
    known to be safe to send."""
    context = CommentContext(
        suite=name,
        flags=CommentFlags(refused=reason) if refused else CommentFlags(stopped=reason),
        pull_request=number,
        links=CommentLinks(workflow_run=runner.run_url),
    )
    runner.add_summary(render_job_summary(context))
    if runner.inputs.comment and runner.repo is not None and not runner.read_only:
        url, created = gh.upsert_comment(
            runner.repo,
            number,
            render_comment(context),
            marker(name),
            author=runner.inputs.comment_author,
            # Nothing was spent; what earlier runs of the pull request spent is carried on.
            carry=_carry(runner, name, context, ()),
        )
        runner.log(f"{name}: comment {'posted' if created else 'updated'}: {url}")
    runner.annotate("warning", f"{name}: INCONCLUSIVE: nothing was run: {reason}")
    runner.outputs.set("verdict", "inconclusive")
    runner.verdicts.append("inconclusive")


def _fork_notice(runner: ActionJob, name: str, number: int) -> None:
    context = CommentContext(
        suite=name,
        flags=CommentFlags(fork=True),
        pull_request=number,
        links=CommentLinks(workflow_run=runner.run_url),
    )
    runner.add_summary(render_job_summary(context))
    runner.annotate(
        "warning",
        f"{name}: this pull request comes from a fork, which gets no secrets; nothing was run "
        "or spent. See the job summary for safe ways to gate fork pull requests.",
    )
    runner.verdicts.append("skipped")


def publish_pr(
    runner: ActionJob, pending: PendingSuite, verdict: Verdict, decision: PullRequestVerdict | None
) -> None:
    name, suite, candidate, found = pending.name, pending.suite, pending.candidate, pending.found
    number, version, fork = pending.number, pending.version, pending.fork
    summary = summarise(candidate, price_as=suite.price_as)
    repo, artifact = (
        runner.env.get("GITHUB_REPOSITORY", "OWNER/REPO"),
        runner.inputs.baseline_artifact,
    )
    reproduce = (
        f"evalgate baseline pull --repo {escape(repo, 'shell')} "
        f"--artifact {escape(artifact, 'shell')}\n"
        f"evalgate gate --suite {escape(name, 'shell')} "
        f"--baseline {escape(f'.evalgate/baseline/{name}.json', 'shell')} "
        f"--candidate {escape(version, 'shell')}{_base_ref_option(runner.event)}"
    )
    context = CommentContext(
        suite=name,
        verdict=verdict,
        candidate=summary,
        baseline=found.provenance,
        # The fork flag means "nothing ran"; here the suite ran (it needs no secret).
        flags=CommentFlags(no_baseline=found.no_baseline, ignored_state=runner.ignored_state),
        links=CommentLinks(
            workflow_run=runner.run_url,
            artifact=found.provenance.artifact_url if found.provenance else None,
        ),
        reproduce=reproduce,
        pull_request=number,
        pull_request_kind=decision.kind if decision else None,
        pull_request_tests=decision.tests if decision else None,
        suite_parts=[(s.suite, s.verdict.kind) for s in decision.suites] if decision else [],
        judge=pending.judge,
        estimated=pending.estimate is not None and not summary.offline,
        expected_usd=pending.estimate.usd if pending.estimate else None,
    )
    publish_verdict(runner, name, number, fork, context, verdict, pending.spent)


def publish_verdict(
    runner: ActionJob,
    name: str,
    number: int,
    fork: bool,
    context: CommentContext,
    verdict: Verdict,
    spent: tuple[SpendRecord, ...] = (),
) -> None:
    """One suite's verdict on a pull request: the job summary, the comment (edited in place;
    none for a fork's read-only token), the annotations and the outputs."""
    runner.add_summary(render_job_summary(context))
    comment_url = None
    if runner.inputs.comment and runner.repo is not None:
        if fork:
            runner.annotate("notice", "fork pull request: the token is read-only, so no comment")
        else:
            comment_url, created = gh.upsert_comment(
                runner.repo,
                number,
                render_comment(context),
                marker(name),
                author=runner.inputs.comment_author,
                carry=_carry(runner, name, context, spent),
            )
            runner.log(f"{name}: comment {'posted' if created else 'updated'}: {comment_url}")
    _annotate_verdict(runner, name, verdict)
    _set_outputs(runner, verdict, comment_url)
    runner.verdicts.append(verdict.kind)


def _carry(
    runner: ActionJob, name: str, context: CommentContext, spent: Sequence[SpendRecord]
) -> Callable[[str, str | None], str]:
    """What makes the comment's body from its report and the comment it replaces: the report,
    rendered again shorter when the ledger (the spend of every job of the pull request, which
    the merge's baseline job reads) would not fit beside it; the ledger is never what is left
    out, unless a ledger folded to one record would take half the comment."""

    def carry(body: str, earlier: str | None) -> str:
        block = ledger_block(earlier, spent)
        if len(block) > gh.COMMENT_MAX // 2:
            runner.annotate(
                "warning",
                f"{name}: the pull request's spend ledger ({len(block):,} characters) no "
                "longer fits its comment: what its jobs spent is not carried on",
            )
            return body
        if len(body.rstrip()) + len(block) > gh.COMMENT_MAX:
            body = render_comment(context, max_chars=gh.COMMENT_MAX - len(block))
        return with_ledger(body, earlier, spent, gh.COMMENT_MAX)

    return carry


def _broken_annotations(
    runner: ActionJob,
    loaded: LoadedConfig,
    suite: Suite,
    assign: Callable[[CaseSet], CaseSet],
    verdict: Verdict,
) -> list[dict[str, Any]]:
    """An annotation at each broken case's file:line, with its expected, baseline and pull
    request answers (cut short; annotations are plain text, so nothing there renders)."""
    if not verdict.broken:
        return []
    sources = {
        c.id: c.source
        for c in load_suite_cases(loaded, suite, assign=assign).cases
        if c.split != "holdout"
    }
    notes = []
    for case in verdict.broken:
        path, _, line = sources.get(case.id, "").rpartition(":")
        try:
            relative = Path(path).resolve().relative_to(runner.workspace.resolve()).as_posix()
        except ValueError:
            continue
        notes.append(broken_annotation(case, relative, int(line) if line.isdigit() else 1))
    return notes


def broken_annotation(case: PairedCase, path: str, line: int) -> dict[str, Any]:
    """A broken case's check-run annotation. Plain text, but shown in the diff and the Checks
    tab: what could read other than it is (bidi overrides, zero-width characters) is shown as
    <U+XXXX>, and line breaks fold."""
    return {
        "path": path,
        "start_line": line,
        "end_line": line,
        "annotation_level": "failure",
        "title": one_line(f"broken: {case.id}")[:200],
        "message": one_line(
            f"expected {case.expected!s:.200}; the baseline answered "
            f"{case.baseline_answer!s:.200}; this pull request answered "
            f"{case.candidate_answer!s:.200}"
        ),
    }


def publish_check(runner: ActionJob, worst: VerdictKind) -> None:
    """One check run named evalgate on the pull request's head: the verdict teams can require."""
    pr = runner.event.get("pull_request") or {}
    head = (pr.get("head") or {}).get("sha")
    if runner.repo is None or not isinstance(head, str) or not runner.check:
        return
    failing = runner.must_fail or worst in set(runner.inputs.fail_on)
    conclusion: gh.CheckConclusion = {
        "pass": "success",
        "fail": "failure",
        "inconclusive": "failure" if failing else "neutral",
        "skipped": "skipped",
    }[worst]
    title = f"evalgate: {worst.upper()}"
    summary = "\n".join(runner.summary) or title
    kind, url = gh.publish_check(
        runner.repo,
        head,
        "evalgate",
        conclusion,
        title,
        summary,
        runner.annotations,
        details_url=runner.run_url,
    )
    if kind == "status":
        runner.log(
            "the token cannot create check runs (it needs checks: write): set the commit "
            "status evalgate instead, without annotations"
        )
    else:
        runner.log(f"check run evalgate: {conclusion}: {url}")


def _base_ref_option(event: dict[str, Any]) -> str:
    """``--base-ref SHA``: locally too, the split is the pull request's base commit's."""
    sha = ((event.get("pull_request") or {}).get("base") or {}).get("sha")
    if isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{7,64}", sha):
        return f" --base-ref {sha}"
    return ""


def _annotate_verdict(runner: ActionJob, name: str, verdict: Verdict) -> None:
    if verdict.kind == "fail":
        runner.annotate("error", f"{name}: FAIL: {verdict.reasons[0]}")
    elif verdict.kind == "inconclusive":
        runner.annotate("warning", f"{name}: INCONCLUSIVE: {verdict.reasons[0]}")
    else:
        runner.log(f"{name}: PASS: {verdict.reasons[0] if verdict.reasons else ''}")
    for warning in verdict.warnings:
        if warning.startswith("underpowered") or "baseline" in warning:
            runner.annotate("warning", f"{name}: {warning}")


def _set_outputs(runner: ActionJob, verdict: Verdict, comment_url: str | None) -> None:
    out = runner.outputs
    out.set("accuracy", output_number(verdict.candidate_accuracy.rate))
    out.set(
        "baseline_accuracy",
        output_number(verdict.baseline_accuracy.rate) if verdict.baseline_accuracy else "",
    )
    out.set("fixed", len(verdict.fixed))
    out.set("broken", len(verdict.broken))
    out.set("p_value", output_number(verdict.p_value))
    out.set("mde", output_number(verdict.mde))
    if comment_url:
        out.set("comment_url", comment_url)
