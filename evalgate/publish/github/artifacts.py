"""Baseline artefacts: the default branch's newest trusted run's artefact, found, downloaded
(following GitHub's redirect, Authorization dropped across hosts) and safely extracted."""

from __future__ import annotations

import itertools
import re
import shutil
import stat
import tempfile
import zipfile
from collections.abc import Collection
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, NoReturn
from urllib.parse import urlsplit

import requests
from github.Artifact import Artifact
from github.GithubException import (
    UnknownObjectException,
)
from github.Repository import Repository
from github.WorkflowRun import WorkflowRun
from pydantic import BaseModel, ConfigDict

from evalgate import __version__
from evalgate.errors import RunFileError
from evalgate.publish.github.client import (
    API_VERSION,
    PERM_ACTIONS_READ,
    ArtifactExpiredError,
    GitHubError,
    calling,
    describe,
)
from evalgate.runs.schema import Run, parse_run, read_run


class BaselineRef(BaseModel):
    """A baseline artefact made by a trusted run (a push, schedule or manual run on the default
    branch)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    artifact_id: int
    name: str
    size_in_bytes: int
    created_at: datetime
    expires_at: datetime | None  # null in GitHub's description: no expiry date
    archive_download_url: str
    run_id: int
    head_sha: str
    head_branch: str
    event: str
    html_url: str
    """The workflow run's page."""


# The events whose runs on the default branch may make a baseline: a push, the weekly
# schedule, a manual run. Never pull_request, pull_request_target or workflow_run: their code
# (or what they download) comes from a pull request.
BASELINE_EVENTS = ("push", "schedule", "workflow_dispatch")


def find_baseline(
    repo: Repository,
    name: str,
    default_branch: str,
    prefer_sha: str | None = None,
    *,
    events: Collection[str] = BASELINE_EVENTS,
    workflow_path: str | None = None,
    max_runs: int = 100,
    max_lookups: int = 30,
) -> BaselineRef | None:
    """The baseline artefact ``name`` to compare a pull request against, or None.

    Only an unexpired artefact made by a run of ``events`` on ``default_branch`` of this
    repository qualifies: pull-request runs upload artefacts under the same name, and one must
    not be able to plant its own baseline, nor hide the real one under a flood of decoys. So
    the workflow runs are listed, filtered by branch and event by GitHub (and checked again
    here), newest first, at most ``max_runs`` of each event, of the workflow ``workflow_path``
    (the one that makes baselines) when it is given; then the artefacts are looked up run by
    run, at most ``max_lookups`` runs, the run built from ``prefer_sha`` (the PR's merge base)
    first, then the newest.
    """
    where = f"{repo.full_name} artefacts named {name!r}"
    now = datetime.now(UTC)
    runs = _listed_runs(repo, default_branch, events, workflow_path, max_runs)
    runs = [run for run in runs if _trusted_run(repo, run, default_branch, events)]
    runs.sort(key=lambda run: (run.created_at, run.id), reverse=True)
    if prefer_sha is not None:
        runs.sort(key=lambda run: run.head_sha != prefer_sha)  # stable: newest first in each
    with calling("list a workflow run's artefacts", where, PERM_ACTIONS_READ):
        for run in runs[:max_lookups]:
            for art in run.get_artifacts():
                if art.name == name and not art.expired and _unexpired(art, now):
                    return _baseline_ref(art, run)
    return None


def _listed_runs(
    repo: Repository,
    branch: str,
    events: Collection[str],
    workflow_path: str | None,
    max_runs: int,
) -> list[WorkflowRun]:
    """The newest runs of each event on ``branch``: of the workflow ``workflow_path`` when it
    is given and known to GitHub (so other workflows' runs take no room), else of any."""
    where = f"{repo.full_name} workflow runs"
    with calling("list the workflow runs", where, PERM_ACTIONS_READ):
        if workflow_path is not None:
            try:
                workflow = repo.get_workflow(workflow_path.rsplit("/", 1)[-1])  # fetches at once
                return [
                    run
                    for event in events
                    for run in itertools.islice(
                        workflow.get_runs(branch=branch, event=event), max_runs
                    )
                ]
            except UnknownObjectException:
                pass  # a workflow renamed or new in this PR: search every workflow's runs
        return [
            run
            for event in events
            for run in itertools.islice(
                repo.get_workflow_runs(branch=branch, event=event),  # type: ignore[arg-type]
                max_runs,
            )
        ]


def _trusted_run(
    repo: Repository, run: WorkflowRun, default_branch: str, events: Collection[str]
) -> bool:
    """Whether a run was made by the default branch of this repository, on a trusted event."""
    data: dict[str, Any] = run.raw_data
    head_repo = data.get("head_repository") or {}
    head_repo_id = head_repo.get("id", data.get("head_repository_id"))
    return (
        data.get("event") in events
        and data.get("head_branch") == default_branch
        and head_repo_id == repo.id
    )


def _unexpired(art: Artifact, now: datetime) -> bool:
    """Not past its expiry date; GitHub's description lets ``expires_at`` be null (no date)."""
    expires = art.expires_at
    return expires is None or expires > now


def _baseline_ref(art: Artifact, run: WorkflowRun) -> BaselineRef:
    data: dict[str, Any] = run.raw_data
    return BaselineRef(
        artifact_id=art.id,
        name=art.name,
        size_in_bytes=art.size_in_bytes,
        # GitHub's description lets an artefact's date be null: the run's is the next best.
        created_at=art.created_at or run.created_at,
        expires_at=art.expires_at,
        archive_download_url=art.archive_download_url,
        run_id=data["id"],
        head_sha=data["head_sha"],
        head_branch=data["head_branch"],
        event=data["event"],
        html_url=data["html_url"],
    )


class _Bearer(requests.auth.AuthBase):
    """Exactly this token: an explicit auth, so requests never looks in ~/.netrc (which it
    does, and lets win over our header, when a request has no auth of its own)."""

    def __init__(self, token: str) -> None:
        self.token = token

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        r.headers["Authorization"] = f"Bearer {self.token}"
        return r


class _NoAuthorization(requests.auth.AuthBase):
    """Send no credentials: drops any Authorization header and stops requests' .netrc lookup."""

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        r.headers.pop("Authorization", None)
        return r


def download_artifact(
    ref: BaselineRef,
    token: str,
    dest_dir: Path,
    session: requests.Session | None = None,
    *,
    max_bytes: int = 200 * 2**20,
    timeout: float = 60.0,
) -> Path:
    """Download and safely extract the artefact's zip; return the folder it was extracted to.

    The token goes to the API only: its answer is a redirect to a signed URL on a storage
    host, which refuses requests that carry ``Authorization``, so the second request is made
    without credentials (explicitly, not trusting requests to drop them). Both the download
    and the extracted content are capped at ``max_bytes``; members that would land outside
    the folder (absolute paths, ``..``, symbolic links) are refused.
    """
    where = f"artefact {ref.name!r} (id {ref.artifact_id}, run {ref.html_url})"
    if ref.size_in_bytes > max_bytes:
        raise GitHubError(
            f"the artefact is {ref.size_in_bytes:,} bytes, over the {max_bytes:,}-byte limit",
            where=where,
            fix="a baseline artefact should hold only the run file; check what the baseline "
            "job uploads",
        )
    own = session is None
    http = session if session is not None else requests.Session()
    dest_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".download-", dir=dest_dir))
    try:
        archive = work / "artifact.zip"
        _fetch_zip(http, ref, token, archive, max_bytes, timeout, where)
        extracted = work / "files"
        _safe_extract(archive, extracted, max_bytes, where)
        final = dest_dir / f"{re.sub(r'[^A-Za-z0-9._-]', '_', ref.name)}-{ref.artifact_id}"
        if final.exists():
            shutil.rmtree(final)
        extracted.rename(final)
        return final
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if own:
            http.close()


def _fetch_zip(
    http: requests.Session,
    ref: BaselineRef,
    token: str,
    archive: Path,
    max_bytes: int,
    timeout: float,
    where: str,
) -> None:
    action = "download the baseline artefact"
    api_headers = {
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": API_VERSION,
        "User-Agent": f"evalgate/{__version__}",
    }
    with calling(action, where, PERM_ACTIONS_READ):
        with http.get(
            ref.archive_download_url,
            headers=api_headers,
            auth=_Bearer(token),
            allow_redirects=False,
            stream=True,
            timeout=timeout,
        ) as first:
            if first.status_code == 200:  # served by the API itself (no storage host)
                _stream_to(first, archive, max_bytes, where)
                return
            if first.status_code not in (301, 302, 303, 307, 308):
                _raise_for_api(first, ref, where)
            location = first.headers.get("Location", "")
        if urlsplit(location).scheme not in ("http", "https"):
            raise GitHubError(
                f"GitHub redirected the download to an unusable address {location!r}",
                where=where,
                fix="re-run the job",
            )
        # The signed URL is its own credential. requests drops Authorization when a redirect
        # changes host, but the storage host refuses any Authorization and the token must
        # never leave the API: make a fresh request that carries none (nor .netrc's).
        with http.get(
            location,
            headers={
                "Authorization": None,  # None removes a header the session may carry
                "User-Agent": f"evalgate/{__version__}",
            },
            auth=_NoAuthorization(),
            allow_redirects=False,
            stream=True,
            timeout=timeout,
        ) as stored:
            if stored.status_code != 200:
                raise GitHubError(
                    f"the artefact storage host answered {stored.status_code} "
                    f"{stored.reason} to the download",
                    where=where,
                    fix="the signed download link may have expired; re-run the job",
                    status=stored.status_code,
                )
            _stream_to(stored, archive, max_bytes, where)


def _raise_for_api(response: requests.Response, ref: BaselineRef, where: str) -> NoReturn:
    try:
        data: Any = response.json()
    except ValueError:
        data = response.text
    if response.status_code == 410:
        said = data.get("message") if isinstance(data, dict) else None
        raise ArtifactExpiredError(
            f"the baseline artefact has expired (410 {said or 'Gone'})",
            where=where,
            fix="artefacts are kept for the repository's retention period (90 days by "
            "default); push to the default branch (or re-run its workflow) to make a new "
            "baseline, and keep release history on the data branch",
            status=410,
        )
    raise describe(
        "download the baseline artefact",
        where,
        PERM_ACTIONS_READ,
        response.status_code,
        data,
        response.headers,
    )


def _stream_to(response: requests.Response, path: Path, max_bytes: int, where: str) -> None:
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        _too_big(max_bytes, where)
    written = 0
    with path.open("wb") as out:
        for chunk in response.iter_content(chunk_size=1 << 16):
            written += len(chunk)
            if written > max_bytes:
                _too_big(max_bytes, where)
            out.write(chunk)


def _too_big(max_bytes: int, where: str) -> NoReturn:
    raise GitHubError(
        f"the artefact is larger than the {max_bytes:,}-byte limit",
        where=where,
        fix="a baseline artefact should hold only the run file; check what the baseline job uploads",
    )


def _safe_extract(archive: Path, folder: Path, max_bytes: int, where: str) -> None:
    """Extract ``archive`` into ``folder``, refusing anything that could escape or explode."""

    def refuse(why: str) -> GitHubError:
        return GitHubError(
            f"refusing to extract the artefact: {why}",
            where=where,
            fix="evalgate's baseline job uploads plain files only; delete this artefact and "
            "re-run the baseline job",
        )

    folder.mkdir()
    root = folder.resolve()
    try:
        zf = zipfile.ZipFile(archive)
    except zipfile.BadZipFile as exc:
        raise refuse(f"not a zip archive ({exc})") from None
    with zf:
        members = zf.infolist()
        if len(members) > 10_000:
            raise refuse(f"{len(members):,} members")
        if sum(m.file_size for m in members) > max_bytes:
            raise refuse(f"its content is larger than the {max_bytes:,}-byte limit")
        for member in members:
            name = member.filename.replace("\\", "/")
            parts = PurePosixPath(name).parts
            if (
                not parts
                or name.startswith("/")
                or ".." in parts
                or ":" in parts[0]
                or "\x00" in name
            ):
                raise refuse(f"member {member.filename!r} would land outside the folder")
            if stat.S_ISLNK(member.external_attr >> 16):
                raise refuse(f"member {member.filename!r} is a symbolic link")
            target = root.joinpath(*parts)
            if not target.resolve().is_relative_to(root):
                raise refuse(f"member {member.filename!r} would land outside the folder")
            if member.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                with zf.open(member) as src, target.open("wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 16)
            except (zipfile.BadZipFile, OSError, EOFError) as exc:
                raise refuse(f"member {member.filename!r} is damaged ({exc})") from None


def load_baseline_run(folder: Path) -> Run:
    """The single run file inside an extracted baseline artefact."""
    found = sorted(p for p in folder.rglob("*.json") if p.is_file())
    if not found:
        raise RunFileError(
            "the baseline artefact holds no run file (*.json)",
            where=str(folder),
            fix="make the baseline job upload the run file that `evalgate run` saves",
        )
    if len(found) == 1:
        return read_run(found[0])
    runs: list[tuple[Path, Run]] = []
    for path in found:
        try:
            runs.append((path, parse_run(path.read_bytes())))
        except (ValueError, OSError):
            continue
    if len(runs) == 1:
        return runs[0][1]
    names = ", ".join(str(p.relative_to(folder)) for p in found[:5])
    raise RunFileError(
        f"the baseline artefact holds {len(runs)} run files among {len(found)} JSON files "
        f"({names}); evalgate needs exactly one",
        where=str(folder),
        fix="upload one run file per baseline artefact",
    )


def find_run_artifact(repo: Repository, run_id: int, name: str) -> BaselineRef | None:
    """The unexpired artefact ``name`` of workflow run ``run_id``, or None.

    For a fork's pull request: the run is untrusted, so what the artefact holds is data to
    check (see fork.py), never code to run.
    """
    where = f"{repo.full_name} run {run_id} artefact {name!r}"
    now = datetime.now(UTC)
    with calling("list the run's artefacts", where, PERM_ACTIONS_READ):
        run = repo.get_workflow_run(run_id)
        for art in run.get_artifacts():
            if art.name != name or art.expired or not _unexpired(art, now):
                continue
            return _baseline_ref(art, run)
    return None
