"""`evalgate doctor`: checks a repository's evalgate setup and says what to fix.

Config, prompts and cases load; the split is healthy; the workflows that use the action have
the permissions, pinned actions, secrets and baseline upload they need, and never check out a
pull request's code under ``pull_request_target``; the state folder is ignored by git.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from evalgate import files
from evalgate.cases.read import Case
from evalgate.cases.split import LEAK_KINDS, check_split
from evalgate.config.load import LoadedConfig, load_config, load_yaml
from evalgate.config.models import DEFAULT_CONFIG, Suite
from evalgate.defaults import BASELINE_ARTIFACT, STATE_DIR
from evalgate.errors import MissingExtraError, UserError
from evalgate.report.render import Format, render_model
from evalgate.running.execute import Job as RunJob
from evalgate.running.suite import load_prompt, load_suite_cases
from evalgate.setup.image import IMAGE_EXTRAS, missing_from_image, program_in_image
from evalgate.setup.init import (
    HOLDOUT_SECRET,
    ID_LIKE,
    SECRET_INPUTS,
    SECRETS,
    SECRETS_PAGE,
    UPLOAD,
    gh_expression,
    gitignore_covers,
    shown_path,
)

Status = Literal["ok", "warn", "FAIL"]


class Finding(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    status: Status
    check: str
    message: str
    fix: str | None = None


class DoctorReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    repo: str
    config: str
    findings: list[Finding]
    counts: dict[str, int]

    @property
    def failed(self) -> bool:
        return self.counts["FAIL"] > 0


def _ok(check: str, message: str) -> Finding:
    return Finding(status="ok", check=check, message=message)


def _warn(check: str, message: str, fix: str | None = None) -> Finding:
    return Finding(status="warn", check=check, message=message, fix=fix)


def _fail(check: str, message: str, fix: str | None = None) -> Finding:
    return Finding(status="FAIL", check=check, message=message, fix=fix)


def _from_error(check: str, exc: UserError) -> Finding:
    what = f"{exc.where}: {exc.what}" if exc.where else exc.what
    return _fail(check, what, exc.fix)


def _check_suite(
    loaded: LoadedConfig, name: str, suite: Suite, env: Mapping[str, str]
) -> list[Finding]:
    out: list[Finding] = []
    label = f"suite {name}"
    try:
        versions = loaded.prompt_files(suite)
        empty = sorted(v for v in versions if not load_prompt(loaded, suite, v).text.strip())
        ship = loaded.ship_version(suite)
    except UserError as exc:
        out.append(_from_error(f"{label}: prompts", exc))
    else:
        shown = ", ".join(sorted(versions))
        out.append(_ok(f"{label}: prompts", f"{len(versions)} version(s) load ({shown})"))
        if empty:
            # A run sends it as it is: no system prompt at all, scored like any other.
            out.append(
                _warn(
                    f"{label}: prompts",
                    f"{', '.join(empty)} {'is' if len(empty) == 1 else 'are'} empty: a run "
                    "sends no system prompt",
                    "write the prompt, or remove the file if it is not a version",
                )
            )
        out.append(_ok(f"{label}: ship", f"pull requests and releases gate {ship}"))
    backends = _check_backends(loaded, label, suite, env)
    out += [finding for finding, _ in backends]
    try:
        missing = [p for p in loaded.dependencies(suite) if not p.exists()]
    except UserError:
        missing = []  # a glob that matches nothing is reported by the prompts or cases check
    if suite.sealed_holdout is not None:
        key = (loaded.root / suite.sealed_holdout.public_key).resolve()
        missing += [key] if not key.exists() and key not in missing else []
    if missing:
        out.append(
            _fail(
                f"{label}: files",
                "missing: " + ", ".join(shown_path(p, loaded.root) for p in missing),
                "paths are relative to evalgate.yml; a sealed holdout starts with "
                "`evalgate holdout keygen` and `evalgate holdout add FILE`",
            )
        )
    notes: list[str] = []
    try:
        cases = load_suite_cases(loaded, suite, on_note=notes.append)
    except UserError as exc:
        out.append(_from_error(f"{label}: cases", exc))
        return out
    if notes:
        out.append(_warn(f"{label}: cases", f"{len(cases.cases)} cases load; " + "; ".join(notes)))
    else:
        out.append(_ok(f"{label}: cases", f"{len(cases.cases)} cases load"))
    report = check_split(cases.cases, suite.split, suite.fields)
    for finding in report.findings:
        ids = ""
        if finding.ids:
            more = "…" if len(finding.ids) > 5 else ""
            ids = f" (ids: {', '.join(finding.ids[:5])}{more})"
        if finding.kind in LEAK_KINDS:
            fix = "fix the cases, then check with `evalgate split`"
            out.append(_fail(f"{label}: split", f"leak: {finding.message}{ids}", fix))
        else:
            out.append(_warn(f"{label}: split", f"{finding.message}{ids}"))
    counts = report.counts
    if counts["dev"] == 0:
        out.append(
            _fail(
                f"{label}: split",
                "no dev cases: pull requests would run nothing",
                "lower split.holdout_fraction, or add cases",
            )
        )
    elif not report.findings:
        out.append(
            _ok(
                f"{label}: split",
                f"dev {counts['dev']}, holdout {counts['holdout']}, "
                f"regression {counts['regression']}; no leaks",
            )
        )
    out += _check_fields(loaded, label, suite, cases.cases)
    runnable = [c for c in cases.cases if c.split != "holdout"]
    rendered, jobs = _check_template(loaded, label, suite, runnable)
    out += rendered
    for (_, backend), role in zip(backends, ("model", "judge"), strict=False):
        if backend is not None and role == "model" and jobs:
            out += _probe(backend, f"{label}: {role}", suite, jobs[0])
        _close(backend)
    out.extend(_check_judge_labels(loaded, label, suite))
    return out


def _check_fields(
    loaded: LoadedConfig, label: str, suite: Suite, cases: Sequence[Case]
) -> list[Finding]:
    """fields.* name fields the cases have; without fields.input, ids do not reach the model."""
    out: list[Finding] = []
    check = f"{label}: fields"
    plain = [c for c in cases if c.split != "holdout" and c.input is not None]
    if not plain:
        return out
    if suite.fields.input is None:
        keys = sorted({k for c in plain for k in c.input})
        ids = [k for k in keys if k == suite.fields.id or ID_LIKE.search(k)]
        f = suite.fields
        labels = {f.expected, f.group, f.category, f.split}
        sends_all = re.search(r"\{\{\s*input\s*\}\}", suite.template) is not None
        if ids and len(keys) > 1:
            out.append(
                _warn(
                    check,
                    "fields.input is not set, so every field of a case is input"
                    + (" and the template sends them all" if sends_all else "")
                    + f", ids too: {', '.join(ids)}",
                    f"list the fields the model should read, e.g. fields.input: "
                    f"[{', '.join(k for k in keys if k not in ids and k not in labels) or '...'}]",
                )
            )
    for key in ("group", "category"):
        name = getattr(suite.fields, key)
        # The default names may be absent (a suite without groups is fine); a name the user
        # chose that no case has is a typo or a stale mapping.
        if name is None or name == key:
            continue
        if not any(getattr(c, key) is not None for c in plain):
            out.append(
                _warn(
                    check,
                    f"fields.{key} is {name!r}, which none of the {len(plain)} cases has",
                    f"fix the name, or set fields.{key}: null",
                )
            )
    if not out:
        out.append(_ok(check, "the mapped fields are in the cases"))
    return out


def _check_template(
    loaded: LoadedConfig, label: str, suite: Suite, cases: Sequence[Case]
) -> tuple[list[Finding], Sequence[RunJob]]:
    """Render the user turn of every case, as a run does before its first call."""
    from evalgate.running.suite import build_jobs

    check = f"{label}: template"
    try:
        prompt = load_prompt(loaded, suite, loaded.ship_version(suite))
    except UserError:
        return [], []  # reported by the prompts check
    try:
        jobs = build_jobs(
            suite,
            prompt,
            cases,
            1,
            template_at=f"{loaded.path.name}: suites.{label.removeprefix('suite ')}.template",
        )
    except UserError as exc:
        return [_from_error(check, exc)], []
    return [_ok(check, f"renders for all {len(cases)} dev and regression cases")], jobs


def _probe(backend: Any, check: str, suite: Suite, job: RunJob) -> list[Finding]:
    """Send one case to a `command` backend, as the run's first call would: the program exists,
    starts, and answers. Paid APIs are not called (their key and options were checked)."""
    if suite.model.backend != "command":
        return []
    try:
        reply = backend.complete(job.request)
    except UserError as exc:
        return [_from_error(check, exc)]
    if reply.error is not None:
        return [
            _fail(
                check,
                f"the program failed on case {job.case_id!r}: {reply.error}",
                "run it by hand with that case on stdin (see the README's command section)",
            )
        ]
    text = " ".join((reply.text or "").split())
    shown = text if len(text) <= 60 else text[:59] + "…"
    return [
        _ok(
            check, f"the program answered case {job.case_id!r} ({reply.latency_s:.2f} s): {shown!r}"
        )
    ]


def _close(backend: Any) -> None:
    close = getattr(backend, "close", None)
    if close is not None:
        close()


def _check_judge_labels(loaded: LoadedConfig, label: str, suite: Suite) -> list[Finding]:
    """The judge's human labels load, and the holdout has enough of them for the floor."""
    judge = suite.judge
    if judge is None:
        return []
    from evalgate.cases.judge_labels import load_labels, split_policy

    check = f"{label}: judge labels"
    try:
        labels = load_labels(loaded.root / judge.labels, suite)
    except UserError as exc:
        return [_from_error(check, exc)]
    sides = Counter(x.split for x in labels)
    passes = Counter(x.split for x in labels if x.human)
    message = f"{len(labels)} labels: dev {sides['dev']}, holdout {sides['holdout']}"
    report = check_split([x.case for x in labels], split_policy(judge, suite), suite.fields)
    leaks = [f for f in report.findings if f.kind in LEAK_KINDS]
    if leaks:
        fix = "give labels of one case the same group, then check with `evalgate judge check`"
        return [_fail(check, f"leak: {leaks[0].message}", fix)]
    if sides["holdout"] < judge.min_labels:
        return [
            _warn(
                check,
                f"{message}; the floor needs {judge.min_labels} holdout labels, so the judge "
                "cannot gate yet",
                "label more replies (or lower judge.min_labels, knowing kappa's interval widens)",
            )
        ]
    one_sided = [s for s in ("dev", "holdout") if passes[s] in (0, sides[s]) and sides[s]]
    if one_sided:
        return [
            _warn(
                check,
                f"{message}; every {one_sided[0]} label has the same verdict, so kappa is "
                "undefined there",
                "label replies that fail as well as replies that pass",
            )
        ]
    return [_ok(check, message)]


def _check_backends(
    loaded: LoadedConfig, label: str, suite: Suite, env: Mapping[str, str]
) -> list[tuple[Finding, Any]]:
    """Build each backend as a run would (its extra imports, its options parse, its key is
    set); each finding with the built backend, or None when it could not be built."""
    from evalgate.backends.base import BackendContext, backend_class, backend_names

    models = [("model", suite.model)]
    if suite.scorer.kind == "judge":
        models.append(("judge", suite.scorer.model))
    out: list[tuple[Finding, Any]] = []
    for role, settings in models:
        check = f"{label}: {role}"
        if settings.backend not in backend_names():
            out.append(
                (
                    _fail(
                        check,
                        f"unknown backend {settings.backend!r}",
                        f"use one of: {', '.join(backend_names())}",
                    ),
                    None,
                )
            )
            continue
        if settings.backend == "fake":
            from evalgate.backends.fake import load_options

            try:
                load_options(settings.options, loaded.root)
            except UserError as exc:
                out.append((_from_error(check, exc), None))
                continue
        secret = SECRETS.get(settings.backend)
        key_needed = bool(secret) and _needs_key(settings.backend, settings)
        try:
            cls = backend_class(settings.backend)
        except MissingExtraError as exc:
            out.append((_from_error(check, exc), None))
            continue
        if key_needed and secret and not env.get(secret):
            # A run here would stop at once; in CI the key comes from the workflow's secret,
            # which the workflow checks below look for.
            make = _fail if env.get("CI") else _warn
            out.append(
                (
                    make(
                        check,
                        f"{settings.backend} {settings.name}: {secret} is not set here, so "
                        "`evalgate run` would stop before its first call",
                        f"export {secret}=... to run locally; in CI pass the {secret} secret",
                    ),
                    None,
                )
            )
            continue
        try:
            backend = cls(settings, BackendContext(base_dir=loaded.root, env=dict(env)))
        except UserError as exc:
            out.append((_from_error(check, exc), None))
            continue
        needs = f"; {secret} is set" if key_needed else ""
        out.append((_ok(check, f"{settings.backend} {settings.name} builds{needs}"), backend))
    return out


def _needs_key(backend: str, settings: Any) -> bool:
    return backend == "anthropic" or (
        backend == "openai" and settings.options.get("key_required", True) is not False
    )


# --- workflows

Role = Literal["pr", "baseline", "release"]


@dataclass
class Job:
    name: str
    data: dict[str, Any]
    steps: list[dict[str, Any]]
    evalgate: list[dict[str, Any]]
    roles: set[str] = field(default_factory=set)


@dataclass
class Workflow:
    rel: str
    data: dict[str, Any]
    triggers: dict[str, Any]
    jobs: list[Job]


def _is_evalgate(uses: str) -> bool:
    return bool(re.search(r"(^|/)evalgate@", uses)) or uses.rstrip("/") == "."


def _pinned(uses: str) -> bool:
    if uses.startswith("./"):
        return True
    if uses.startswith("docker://"):
        return "@sha256:" in uses
    return bool(re.search(r"@[0-9a-f]{40}$", uses))


def _triggers(data: dict[Any, Any]) -> dict[str, Any]:
    # YAML 1.1 reads the key `on` as true.
    on = data.get("on", data.get(True))
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return {str(t): None for t in on}
    return {str(k): v for k, v in on.items()} if isinstance(on, dict) else {}


def _with(step: dict[str, Any]) -> dict[str, str]:
    given = step.get("with")
    return {str(k): str(v) for k, v in given.items()} if isinstance(given, dict) else {}


def _roles(job: dict[str, Any], step: dict[str, Any], triggers: dict[str, Any]) -> set[str]:
    """Which modes an evalgate step runs in: its ``mode`` input, else the events that reach it."""
    mode = _with(step).get("mode", "auto")
    if mode in ("pr", "baseline", "release"):
        return {mode}
    if mode != "auto":
        return set()
    roles: set[str] = set()
    if "pull_request" in triggers or "pull_request_target" in triggers:
        roles.add("pr")
    if "push" in triggers:
        push = triggers["push"] if isinstance(triggers["push"], dict) else {}
        branches = "branches" in push or "branches-ignore" in push
        tags = "tags" in push or "tags-ignore" in push
        if branches or not tags:
            roles.add("baseline")
        if tags or not branches:
            roles.add("release")
    if "schedule" in triggers:
        roles.add("baseline")
    condition = str(job.get("if", ""))
    if re.search(r"event_name\s*==\s*'pull_request", condition):
        roles &= {"pr"}
    if re.search(r"event_name\s*!=\s*'pull_request", condition):
        roles.discard("pr")
    if re.search(r"event_name\s*==\s*'push'", condition):
        roles -= {"pr"}
    tag_test = r"startsWith\(\s*github\.ref\s*,\s*'refs/tags/"
    if re.search(r"!\s*" + tag_test, condition):
        roles.discard("release")
    elif re.search(tag_test, condition):
        roles &= {"release"}
    return roles


def read_workflows(repo: Path) -> tuple[list[Workflow], list[Finding]]:
    """The workflows under .github/workflows that use the evalgate action."""
    folder = repo / ".github" / "workflows"
    paths = sorted(p for p in folder.glob("*") if p.suffix in (".yml", ".yaml"))
    found: list[Workflow] = []
    problems: list[Finding] = []
    for path in paths:
        rel = shown_path(path, repo)
        try:
            text = files.read_bytes(path, "workflow").decode("utf-8", errors="replace")
        except UserError as exc:
            problems.append(_fail(f"workflow {rel}", exc.one_line()))
            continue
        try:
            # The project's loader: aliases and nesting bounded, YAML 1.2 (as GitHub reads it).
            data = load_yaml(text, Path(rel), UserError)
        except UserError as exc:
            if "evalgate" in text:
                problems.append(_fail(f"workflow {rel}", exc.one_line()))
            continue
        if not isinstance(data, dict) or not isinstance(data.get("jobs"), dict):
            continue
        triggers = _triggers(data)
        jobs = []
        for name, job in data["jobs"].items():
            if not isinstance(job, dict):
                continue
            raw = job.get("steps")
            steps = [s for s in raw if isinstance(s, dict)] if isinstance(raw, list) else []
            ours = [s for s in steps if _is_evalgate(str(s.get("uses", "")))]
            roles: set[str] = set()
            for step in ours:
                roles |= _roles(job, step, triggers)
            jobs.append(Job(str(name), job, steps, ours, roles))
        if any(job.evalgate for job in jobs):
            found.append(Workflow(rel, data, triggers, jobs))
    return found, problems


def _level(permissions: Any, scope: str) -> int:
    """0 none, 1 read, 2 write."""
    if permissions == "write-all":
        return 2
    if permissions == "read-all":
        return 1
    if isinstance(permissions, dict):
        return {"write": 2, "read": 1}.get(str(permissions.get(scope, "none")), 0)
    return 0


# (scope, level, status when missing, what for), per role.
NEEDS: dict[str, list[tuple[str, int, Status, str]]] = {
    "pr": [
        ("pull-requests", 2, "FAIL", "the comment"),
        ("actions", 1, "FAIL", "reading the baseline artefact"),
        ("contents", 1, "warn", "the checkout"),
    ],
    "release": [
        ("contents", 2, "FAIL", "the evalgate-data branch: release history and the read ledger"),
        ("checks", 2, "warn", "the check run on the tagged commit"),
    ],
    "baseline": [("contents", 1, "warn", "the checkout")],
}
_NAMES = {1: "read", 2: "write"}


# A pull request's judge check reads the judge's holdout labels and must keep the read in the
# suite's ledger on the data branch: the pull-request job then writes contents too.
JUDGED_PR_NEEDS: tuple[str, int, Status, str] = (
    "contents",
    2,
    "FAIL",
    "the read ledger of the judge's holdout labels",
)


def _check_permissions(workflow: Workflow, judged: bool = False) -> list[Finding]:
    """Each evalgate job's token scopes against its roles' needs; ``judged``: a suite's judge
    has human labels, so the pull-request job keeps reads of them on the data branch."""
    check = f"workflow {workflow.rel}: permissions"
    top = workflow.data.get("permissions")
    out: list[Finding] = []
    if top == "write-all":
        out.append(
            _warn(check, "the workflow grants `permissions: write-all`", "list only the scopes")
        )
    for job in workflow.jobs:
        if not job.roles:
            continue
        permissions = job.data.get("permissions", top)
        needed = [n for role in sorted(job.roles) for n in NEEDS[role]]
        if judged and "pr" in job.roles:
            needed = [n for n in needed if n[0] != "contents"] + [JUDGED_PR_NEEDS]
        wanted = ", ".join(f"{s}: {_NAMES[lvl]}" for s, lvl, _, _ in needed)
        if permissions is None:
            out.append(
                _warn(
                    check,
                    f"job {job.name} has no permissions block, so its token gets the "
                    "repository's default (read-only in new repositories, where the comment "
                    "fails; write-all in older ones)",
                    f"add to job {job.name}: permissions: {{{wanted}}}",
                )
            )
            continue
        if job.data.get("permissions") == "write-all":
            out.append(
                _warn(
                    check,
                    f"job {job.name} has `permissions: write-all`",
                    f"grant only {wanted}",
                )
            )
            continue
        for scope, level, status, why in needed:
            if _level(permissions, scope) < level:
                out.append(
                    Finding(
                        status=status,
                        check=check,
                        message=f"job {job.name} ({'/'.join(sorted(job.roles))}) lacks "
                        f"`{scope}: {_NAMES[level]}`, needed for {why}",
                        fix=f"add `{scope}: {_NAMES[level]}` to job {job.name}'s permissions",
                    )
                )
    if not out:
        jobs = ", ".join(
            f"{j.name} ({'/'.join(sorted(j.roles))})" for j in workflow.jobs if j.roles
        )
        out.append(_ok(check, f"each evalgate job has the scopes it needs: {jobs}"))
    return out


def _check_pins(workflow: Workflow) -> list[Finding]:
    check = f"workflow {workflow.rel}: pinning"
    refs = []
    for job in workflow.jobs:
        refs += [str(s["uses"]) for s in job.steps if "uses" in s]
        if isinstance(job.data.get("uses"), str):
            refs.append(job.data["uses"])
    ours = sorted({r for r in refs if _is_evalgate(r) and not _pinned(r)})
    loose = sorted({r for r in refs if not _is_evalgate(r) and not _pinned(r)})
    if loose:
        return [
            _warn(
                check,
                "actions not pinned to a commit sha (a moved tag runs other code with this "
                "job's token and secrets): " + ", ".join(loose),
                "pin each to the full commit sha of its release, with the tag in a comment",
            )
        ]
    message = "third-party actions are pinned to commit shas"
    if ours:
        message += f" ({', '.join(ours)} follows a tag: pin it to a release's sha once adopted)"
    return [_ok(check, message)]


def _check_state_cache(workflow: Workflow) -> list[Finding]:
    """An actions/cache step that restores the state folder into an evalgate job's checkout:
    the action ignores that folder (a pull request can write it), so the step only costs."""
    jobs = sorted(
        {
            job.name
            for job in workflow.jobs
            if job.evalgate
            for step in job.steps
            if str(step.get("uses", "")).startswith("actions/cache")
            and STATE_DIR in str(_with(step).get("path", ""))
        }
    )
    if not jobs:
        return []
    return [
        _warn(
            f"workflow {workflow.rel}: response cache",
            f"job {', '.join(jobs)} restores {STATE_DIR}/ with actions/cache, which the action "
            "ignores: a pull request can write that folder, so the action keeps its state "
            "outside the checkout",
            "remove the actions/cache step",
        )
    ]


def _checks_out_head(step: dict[str, Any]) -> bool:
    heads = ("github.event.pull_request.head", "github.head_ref", "refs/pull/", "gh pr checkout")
    if str(step.get("uses", "")).startswith("actions/checkout"):
        text = " ".join(_with(step).values())
    else:
        text = str(step.get("run", ""))
    return any(h in text for h in heads)


def _check_trigger(workflow: Workflow) -> list[Finding]:
    if "pull_request_target" not in workflow.triggers:
        return []
    check = f"workflow {workflow.rel}: pull_request_target"
    heads = sorted({j.name for j in workflow.jobs for s in j.steps if _checks_out_head(s)})
    if heads:
        return [
            _fail(
                check,
                f"pull_request_target with a checkout of the pull request's code (job "
                f"{', '.join(heads)}): the job has this repository's secrets and a write token, "
                "and the PR's prompts, templates, command backend or python scorer run inside "
                "it, so anyone who opens a pull request can read the API key or push code",
                "trigger on pull_request (fork PRs get no secrets; evalgate explains the safe "
                "patterns), or run the PR's code unprivileged and post from a workflow_run job",
            )
        ]
    return [
        _warn(
            check,
            "pull_request_target runs the base branch's code, so the gate tests the base "
            "prompt, not the pull request's",
            "trigger on pull_request",
        )
    ]


def _env_secret(workflow: Workflow, job: Job, step: dict[str, Any], name: str) -> str | None:
    for scope in (step, job.data, workflow.data):
        env = scope.get("env")
        if isinstance(env, dict) and name in env:
            return str(env[name])
    return None


def _check_secrets(workflow: Workflow, loaded: LoadedConfig) -> list[Finding]:
    check = f"workflow {workflow.rel}: secrets"
    suites = list(loaded.config.suites.items())
    models = [(n, s.model) for n, s in suites]
    models += [(n, s.scorer.model) for n, s in suites if s.scorer.kind == "judge"]
    need = {m.backend: n for n, m in models if m.backend in SECRETS and _needs_key(m.backend, m)}
    sealed = [n for n, s in suites if s.sealed_holdout is not None]
    out: list[Finding] = []
    seen: set[str] = set()
    for job in workflow.jobs:
        if not job.roles:
            continue
        for step in job.evalgate:
            given = _with(step)
            for backend, suite in need.items():
                secret = SECRETS[backend]
                wanted = gh_expression(f"secrets.{secret}")
                if backend in SECRET_INPUTS:
                    where = f"input {SECRET_INPUTS[backend]}"
                    value = given.get(SECRET_INPUTS[backend])
                    fix = f"add `{SECRET_INPUTS[backend]}: {wanted}` to the evalgate step's with:"
                else:
                    where = f"env {secret}"
                    value = _env_secret(workflow, job, step, secret)
                    fix = f"add `env: {{{secret}: {wanted}}}` to the evalgate step"
                if not value:
                    out.append(
                        _fail(
                            check,
                            f"job {job.name}: suite {suite} runs on {backend}, and the evalgate "
                            f"step has no {where}",
                            f"{fix}, and the secret {secret} under {SECRETS_PAGE}",
                        )
                    )
                elif "${{" not in value:
                    out.append(
                        _fail(
                            check,
                            f"job {job.name}: the {where} is written into the workflow, where "
                            "anyone who can read the repository can use it",
                            f"revoke that key; store a new one as {secret} under {SECRETS_PAGE} "
                            f"and pass {wanted}",
                        )
                    )
                else:
                    seen.update(re.findall(r"secrets\.([A-Za-z0-9_]+)", value))
            holdout = given.get("holdout_key")
            if sealed and "release" in job.roles:
                if not holdout:
                    out.append(
                        _fail(
                            check,
                            f"job {job.name} makes releases of suite {sealed[0]}, whose holdout "
                            "is sealed, and passes no holdout_key",
                            f"add `holdout_key: {gh_expression('secrets.' + HOLDOUT_SECRET)}`, with the "
                            "secret in the job's protected environment",
                        )
                    )
                elif not job.data.get("environment"):
                    out.append(
                        _fail(
                            check,
                            f"job {job.name} passes holdout_key outside an environment, so the "
                            "key is a repository secret any workflow on any branch can read",
                            f"add `environment: release` to job {job.name}, protect it under "
                            f"Settings → Environments, and move {HOLDOUT_SECRET} into it",
                        )
                    )
                else:
                    seen.update(re.findall(r"secrets\.([A-Za-z0-9_]+)", holdout))
            if holdout and "pr" in job.roles:
                out.append(
                    _fail(
                        check,
                        f"job {job.name} runs on pull requests and gets holdout_key: a pull "
                        "request could read the sealed holdout",
                        "pass holdout_key only in the release job",
                    )
                )
    if not out:
        if seen:
            names = ", ".join(sorted(seen))
            message = f"the evalgate steps pass {names}: make sure each exists under {SECRETS_PAGE}"
        else:
            message = "the suites' backends need no secret"
        out.append(_ok(check, message))
    return out


def _check_image(workflow: Workflow, loaded: LoadedConfig) -> list[Finding]:
    """The action runs in its image: each suite's backends (the model's, the judge's) must be
    installed there, and a `command` backend's program must exist there."""
    if not any(job.evalgate for job in workflow.jobs):
        return []
    check = f"workflow {workflow.rel}: image"
    models = [(n, s.model) for n, s in loaded.config.suites.items()]
    models += [
        (n, s.scorer.model) for n, s in loaded.config.suites.items() if s.scorer.kind == "judge"
    ]
    out: list[Finding] = []
    for backend in missing_from_image(m.backend for _, m in models):
        suite = next(n for n, m in models if m.backend == backend)
        out.append(
            _fail(
                check,
                f"suite {suite} runs on {backend}, which the action's image does not install "
                f"(it installs {', '.join(IMAGE_EXTRAS)})",
                "run that suite with the CLI in a job of its own (pip install the extra), or "
                "use a backend the image has",
            )
        )
    for suite, model in models:
        if model.backend != "command":
            continue
        command = model.options.get("command")
        argv = shlex.split(command) if isinstance(command, str) else list(command or [])
        if argv and not program_in_image(str(argv[0])):
            out.append(
                _warn(
                    check,
                    f"suite {suite}: the command backend starts {argv[0]!r}, which the action's "
                    "image (python:3.11-slim) does not have",
                    "start it through python or a script in the repository, or run the suite "
                    "with the CLI on a runner that has the program",
                )
            )
    if not out:
        used = sorted({m.backend for _, m in models})
        out.append(
            _ok(check, f"the action's image runs these suites' backends ({', '.join(used)})")
        )
    return out


def _check_baseline_upload(workflow: Workflow) -> tuple[list[Finding], list[str]]:
    """Each baseline job uploads the run file; returns the artefact names it uploads."""
    check = f"workflow {workflow.rel}: baseline"
    out: list[Finding] = []
    names: list[str] = []
    for job in workflow.jobs:
        if "baseline" not in job.roles:
            continue
        ids = [str(s["id"]) for s in job.evalgate if "id" in s]
        uploads = [
            s for s in job.steps if str(s.get("uses", "")).startswith("actions/upload-artifact")
        ]
        good = [
            s
            for s in uploads
            if any(f"steps.{i}.outputs.run_file" in _with(s).get("path", "") for i in ids)
        ]
        if good:
            names += [_with(s).get("name", "artifact") for s in good]
            continue
        step_id = ids[0] if ids else "evalgate"
        fix = (
            f"add a step `uses: {UPLOAD.split(' ')[0]}` with name: {BASELINE_ARTIFACT} and "
            f"path: {gh_expression(f'steps.{step_id}.outputs.run_file')}"
        )
        if not ids:
            fix = f"give the evalgate step `id: evalgate`, then {fix}"
        out.append(
            _fail(
                check,
                f"job {job.name} makes a baseline but does not upload the run file, so pull "
                "requests find no baseline",
                fix,
            )
        )
    if not out and names:
        out.append(_ok(check, f"baseline runs are uploaded as {', '.join(sorted(set(names)))}"))
    return out, names


def _check_workflows(repo: Path, config_path: Path, loaded: LoadedConfig | None) -> list[Finding]:
    workflows, out = read_workflows(repo)
    if not workflows:
        if not out:
            out.append(
                _warn(
                    "workflows",
                    "no workflow under .github/workflows uses the evalgate action",
                    "run `evalgate init`, or copy examples/workflows/evalgate.yml",
                )
            )
        return out
    uploaded: list[str] = []
    wanted: dict[str, str] = {}
    for workflow in workflows:
        out += _check_trigger(workflow)
        judged = loaded is not None and any(
            suite.judge is not None for suite in loaded.config.suites.values()
        )
        out += _check_permissions(workflow, judged)
        out += _check_pins(workflow)
        out += _check_state_cache(workflow)
        if loaded is not None:
            out += _check_secrets(workflow, loaded)
            out += _check_tags(workflow, loaded)
            out += _check_image(workflow, loaded)
        found, names = _check_baseline_upload(workflow)
        out += found
        uploaded += names
        for job in workflow.jobs:
            for step in job.evalgate:
                out += _check_config_input(repo, config_path, workflow, job, step)
                if "pr" in job.roles:
                    name = _with(step).get("baseline_artifact", BASELINE_ARTIFACT)
                    wanted[name] = f"{workflow.rel} job {job.name}"
    roles = {r for w in workflows for j in w.jobs for r in j.roles}
    if "pr" not in roles:
        out.append(
            _warn(
                "workflows",
                "no evalgate job runs on pull requests",
                "trigger on pull_request (see examples/workflows/evalgate.yml)",
            )
        )
    if "baseline" not in roles:
        out.append(
            _warn(
                "workflows",
                f"no evalgate job runs on pushes to the default branch, so there is no "
                f"{BASELINE_ARTIFACT} artefact: every pull request runs the base prompt too "
                "(twice the cost), without a noise floor",
                "add the baseline job of examples/workflows/evalgate.yml",
            )
        )
    if wanted and uploaded:
        for name, where in wanted.items():
            if name not in uploaded:
                out.append(
                    _fail(
                        "workflows: baseline artefact",
                        f"{where} looks for the artefact {name!r}, but the baseline job uploads "
                        f"{', '.join(repr(u) for u in sorted(set(uploaded)))}",
                        "use one name in the upload step's name: and the baseline_artifact input",
                    )
                )
        if all(name in uploaded for name in wanted):
            out.append(
                _ok(
                    "workflows: baseline artefact",
                    f"pull requests read the artefact the baseline job uploads "
                    f"({', '.join(sorted(wanted))})",
                )
            )
    return out


def _check_config_input(
    repo: Path, config_path: Path, workflow: Workflow, job: Job, step: dict[str, Any]
) -> list[Finding]:
    given = _with(step)
    path = repo / given.get("working_directory", ".") / given.get("config", DEFAULT_CONFIG)
    if path.resolve() == config_path.resolve():
        return []
    check = f"workflow {workflow.rel}: config"
    if not path.is_file():
        return [
            _fail(
                check,
                f"job {job.name} reads {shown_path(path, repo)}, which does not exist",
                "fix the evalgate step's config / working_directory inputs",
            )
        ]
    return [
        _warn(
            check,
            f"job {job.name} reads {shown_path(path, repo)}, not the config checked here",
            f"check it too: `evalgate doctor --config {shown_path(path, repo)}`",
        )
    ]


def _check_tags(workflow: Workflow, loaded: LoadedConfig) -> list[Finding]:
    push = workflow.triggers.get("push")
    if not isinstance(push, dict) or not any("release" in j.roles for j in workflow.jobs):
        return []
    tags = push.get("tags")
    if not isinstance(tags, list) or [str(t) for t in tags] == [loaded.config.release_tags]:
        return []
    return [
        _warn(
            f"workflow {workflow.rel}: tags",
            f"the push trigger's tags {tags} differ from release_tags "
            f"{loaded.config.release_tags!r} in evalgate.yml: a tag matching one but not the "
            "other fails the job or is never released",
            "use the same pattern in both",
        )
    ]


def _check_gitignore(repo: Path, state_dir: Path) -> list[Finding]:
    check = "gitignore"
    try:
        rel = state_dir.resolve().relative_to(repo.resolve())
    except ValueError:
        return []
    # A .gitignore in the repository's root or in any folder on the way down to the state dir.
    folders = [repo.resolve().joinpath(*rel.parts[:i]) for i in range(len(rel.parts))]
    for folder in folders:
        ignore = folder / ".gitignore"
        if ignore.is_file():
            lines = ignore.read_text(encoding="utf-8", errors="replace").splitlines()
            if gitignore_covers(lines, state_dir.resolve().relative_to(folder).as_posix()):
                return [_ok(check, f"{rel.as_posix()}/ is ignored by {shown_path(ignore, repo)}")]
    return [
        _warn(
            check,
            f"{rel.as_posix()}/ is not in .gitignore, so saved runs, the response cache, the "
            "holdout read ledger and downloaded baselines could be committed",
            f"add the line `{STATE_DIR}/` to .gitignore",
        )
    ]


def doctor(
    repo: Path,
    config_path: Path,
    suite: str | None = None,
    env: Mapping[str, str] | None = None,
) -> DoctorReport:
    """Check a repository's evalgate setup: config, prompts, cases, split, workflows, ignores.

    ``env`` is the environment `evalgate run` would see (the composition root's): the backend
    is built with it as a run builds it, so a missing extra or key is found here."""
    env = dict(env or {})
    findings: list[Finding] = []
    loaded = None
    try:
        loaded = load_config(config_path)
    except UserError as exc:
        findings.append(_from_error("config", exc))
    if loaded is not None:
        names = list(loaded.config.suites)
        findings.append(
            _ok("config", f"{shown_path(config_path, repo)} is valid ({', '.join(names)})")
        )
        try:
            chosen = [loaded.suite(suite)] if suite else list(loaded.config.suites.items())
        except UserError as exc:
            findings.append(_from_error("config", exc))
            chosen = []
        for name, entry in chosen:
            findings += _check_suite(loaded, name, entry, env)
    findings += _check_workflows(repo, config_path, loaded)
    state_dir = loaded.state_dir if loaded else config_path.parent / STATE_DIR
    findings += _check_gitignore(repo, state_dir)
    findings.append(_check_template_cache(env))
    counts = Counter(f.status for f in findings)
    return DoctorReport(
        repo=str(repo),
        config=str(config_path),
        findings=findings,
        counts={s: counts.get(s, 0) for s in ("ok", "warn", "FAIL")},
    )


def _check_template_cache(env: Mapping[str, str]) -> Finding:
    """Where compiled report templates are kept, or why they are not (each command then
    compiles what it shows: benchmarks/footprint.py times both)."""
    from evalgate.report import template_cache

    check = "template cache"
    directory = template_cache.folder(env)
    if directory is None:
        return _ok(check, "off: each command compiles the report it shows")
    real, why = template_cache.verdict(directory, env)
    if real is not None:
        return _ok(check, f"{real}")
    return _warn(
        check,
        f"{directory} is not used: {why}; each command compiles the report it shows",
        f"point {template_cache.VARIABLE} at a folder only you can write, or set it to "
        f"{template_cache.OFF}",
    )


def render_doctor(report: DoctorReport, fmt: Format) -> str:
    return render_model("doctor", report, fmt)
