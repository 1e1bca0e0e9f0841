"""The container end-to-end test: the action's real image, run by act, against both stand-ins.

A throwaway repository (origin https://github.com/acme/widgets.git) holds the action's build
context copied from this tree, a suite whose model backend is ``anthropic`` and a workflow
derived from examples/workflows/evalgate.yml (``uses: ./``; remote actions other than checkout
are skipped under act). The Messages stand-in and the GitHub REST stand-in serve on 127.0.0.1
in this process; act runs the job and the action's container with host networking, so both
reach them. In order:

1. ``docker build`` of the action image (the first build installs the pinned dependencies from
   PyPI; later builds hit the layer cache);
2. a ``push`` run (``--bind``) writes the baseline run file, which is then uploaded to the
   GitHub stand-in as the ``evalgate-baseline`` artefact of that push run;
3. a ``pull_request`` run posts exactly one comment on PR 7 and sets the step outputs;
4. a second ``pull_request`` run edits that comment instead of adding one;
5. a planted regression in the PR's prompt fails the job, and the comment says so;
6. a pull request that re-splits (``holdout_fraction: 0`` in its own evalgate.yml) sends none
   of the base's holdout cases to the model, and fails with the reason in the comment;
7. a fork's pull request gets its verdict through the ``workflow_run`` job
   (examples/workflows/evalgate-fork.yml): its data (a harmless prompt edit) is gated on the
   default branch's checkout, with a comment and a check run; data that also changes the config
   is refused, with a comment saying why.

Docker and act come from scripts/container-setup. Without them the module is skipped, unless
``EVALGATE_CONTAINER=required`` (set by .ci/run once the setup succeeded): then it fails.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

import evalgate
from evalgate.backends.fake import load_rules
from evalgate.report.comment import marker
from evalgate.runs.schema import read_run
from tests.support.github_server import BOT_LOGIN, GitHubServer, WorkflowRun
from tests.support.messages_server import Knobs, MessagesServer
from tests.support.openai_server import OpenAIServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "bike-shop"
EXAMPLE_WORKFLOW = ROOT / "examples" / "workflows" / "evalgate.yml"
FORK_WORKFLOW = ROOT / "examples" / "workflows" / "evalgate-fork.yml"

REQUIRED = os.environ.get("EVALGATE_CONTAINER", "").strip().lower() == "required"
BASE_IMAGE = "python:3.11-slim"  # the Dockerfile's default base; a local image (container-setup)
JOB_IMAGE = os.environ.get("EVALGATE_JOB_IMAGE", "evalgate-runner:bookworm")
ACTION_IMAGE = "evalgate-action:e2e"
# The image action.yml names (`image: docker://...`, the released image). The test builds the
# image from this tree with `docker build` and tags it with that name, and act (--pull=false)
# runs the local image instead of pulling it: the docker:// form users get, built from this
# code. Two act runs at once would race on this tag: every act run of this test (and of
# scripts/smoke-act) holds ACT_LOCK.
ACT_IMAGE = (
    yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))["runs"]["image"]
).removeprefix("docker://")
ACT_LOCK = Path(os.environ.get("EVALGATE_ACT_LOCK", "/tmp/evalgate-act.lock"))

REPO = "acme/widgets"
SUITE = "bike-shop"
SUITE_DIR = "evals/bike-shop"
MODEL = "claude-haiku-4-5"
N_CASES = 40
PR = 7
BRANCH = "prompt-tweak"
FORK_REPO = "forker/widgets"
FORK_PR = 9
FORK_BRANCH = "fork-tweak"
ARTIFACT = "evalgate-baseline"
# Long, distinctive fake secrets: act masks secret values in its log, and a leak is easy to spot.
GITHUB_TOKEN = "ghs_EvalgateContainerE2eFakeGithubToken7Qx2Lm9Rt4Vw"
ANTHROPIC_KEY = "sk-ant-api03-EvalgateContainerE2eFakeAnthropicKey-5Jk8Pz3Hn6"
OUT_PREFIX = "E2E-OUT"
# When set, act's logs are also copied to this folder (pytest keeps only its last 3 temp dirs).
LOG_DIR = os.environ.get("EVALGATE_E2E_LOGS")

T = TypeVar("T")


# --------------------------------------------------------------------------- availability


def _unavailable() -> str | None:
    """Why the container test cannot run here, or None when Docker, act and the images are there."""
    for tool in ("docker", "act"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not on PATH (run scripts/container-setup as root)"
    try:
        info = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the Docker daemon does not answer ({exc})"
    if info.returncode != 0:
        said = (info.stderr.strip().splitlines() or ["no output"])[-1]
        return f"the Docker daemon does not answer: {said}"
    for image in (BASE_IMAGE, JOB_IMAGE):
        try:
            found = subprocess.run(
                ["docker", "image", "inspect", image], capture_output=True, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"the Docker daemon does not answer ({exc})"
        if found.returncode != 0:
            return f"the local image {image} is missing (run scripts/container-setup)"
    return None


UNAVAILABLE = _unavailable()
if UNAVAILABLE is not None and not REQUIRED:
    pytest.skip(f"container test: {UNAVAILABLE}", allow_module_level=True)

# One worker runs them all, in order: they share one image build and one Docker engine.
pytestmark = [pytest.mark.container, pytest.mark.slow, pytest.mark.xdist_group("container")]


# --------------------------------------------------------------------------- helpers


def _run(
    args: list[str], *, cwd: Path | None = None, timeout: float = 600, check: bool = True
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        args,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)} exited {done.returncode}:\n{_tail(done.stdout, 60)}"
        )
    return done


def _tail(text: str, lines: int = 80) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _image_id(image: str) -> str:
    return _run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", image], timeout=60
    ).stdout.strip()


def _git(repo: Path, *args: str) -> str:
    identity = ["-c", "user.name=e2e", "-c", "user.email=e2e@example.invalid"]
    return _run(["git", *identity, *args], cwd=repo, timeout=60).stdout.strip()


@contextlib.contextmanager
def _act_lock(timeout_s: float = 900) -> Iterator[None]:
    """Hold the act lock (see ACT_LOCK), waiting up to ``timeout_s`` for another holder."""
    ACT_LOCK.parent.mkdir(parents=True, exist_ok=True)
    with ACT_LOCK.open("a") as handle:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"another act run held {ACT_LOCK} for over {timeout_s:.0f} s")
                time.sleep(1)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def derive_workflow(example: dict[Any, Any], outputs: list[str]) -> dict[str, Any]:
    """examples/workflows/evalgate.yml as this repository would use it under act.

    The published action becomes ``uses: ./`` with ``working_directory`` set to the suite;
    after each evalgate step with an id, a step (``if: always()``) echoes all its outputs.
    Other remote actions stay as they are: act runs local stand-ins for them (see ``STUBS``).
    """
    flow = copy.deepcopy(example)
    if True in flow:  # YAML 1.1 reads the key `on` as true
        flow["on"] = flow.pop(True)
    for job in flow["jobs"].values():
        steps = []
        for step in job["steps"]:
            steps.append(step)
            if str(step.get("uses", "")).startswith("evalgate/evalgate@"):
                step["uses"] = "./"
                step.setdefault("with", {})["working_directory"] = SUITE_DIR
                if "id" in step:
                    steps.append(_echo_step(step["id"], outputs))
        job["steps"] = steps
    return flow


def remote_actions(workflow: dict[str, Any]) -> set[str]:
    """``owner/name@ref`` of every remote action the workflow uses, except actions/checkout
    (which act replaces with a copy of the working tree)."""
    found = set()
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            uses = str(step.get("uses", ""))
            if uses and not uses.startswith(("./", "actions/checkout@", "docker://")):
                found.add(uses)
    return found


# Local stand-ins for remote actions (act cannot fetch them here): act runs them through
# --local-repository. upload-artifact copies the file into .e2e-artifacts/NAME/ of the
# workspace (bound to the host with --bind), whence the test uploads it to the GitHub
# stand-in; anything else (actions/cache) does nothing.
UPLOAD_STUB = """\
name: upload-artifact (container test stand-in)
description: Copies the file into .e2e-artifacts/NAME/ of the workspace.
inputs:
  name: {default: artifact}
  path: {required: true}
  retention-days: {default: ""}
runs:
  using: composite
  steps:
    - shell: bash
      env:
        NAME: ${{ inputs.name }}
        SOURCE: ${{ inputs.path }}
      run: |
        mkdir -p "$GITHUB_WORKSPACE/.e2e-artifacts/$NAME"
        cp "$SOURCE" "$GITHUB_WORKSPACE/.e2e-artifacts/$NAME/"
        echo "E2E-ARTIFACT $NAME $(basename "$SOURCE")"
"""
NOOP_STUB = """\
name: no-op (container test stand-in)
description: Does nothing.
inputs:
  path: {default: ""}
  key: {default: ""}
  restore-keys: {default: ""}
runs:
  using: composite
  steps:
    - shell: bash
      run: echo "E2E-STUB skipped a remote action"
"""


def write_stubs(folder: Path, uses: set[str]) -> list[str]:
    """A local action for each of ``uses``; returns act's --local-repository arguments."""
    args = []
    for action in sorted(uses):
        name = action.partition("@")[0]
        stub = folder / re.sub(r"[^A-Za-z0-9._-]", "-", action)
        stub.mkdir(parents=True)
        text = UPLOAD_STUB if name == "actions/upload-artifact" else NOOP_STUB
        (stub / "action.yml").write_text(text, encoding="utf-8")
        args += ["--local-repository", f"{action}={stub}"]
    return args


def _echo_step(step_id: str, outputs: list[str]) -> dict[str, Any]:
    lines = [
        f'echo "{OUT_PREFIX} {name}=${{{{ steps.{step_id}.outputs.{name} }}}}"' for name in outputs
    ]
    lines.append(f'echo "{OUT_PREFIX} workspace=${{{{ github.workspace }}}}"')
    lines.append(f'echo "{OUT_PREFIX} outcome=${{{{ steps.{step_id}.outcome }}}}"')
    return {"name": "e2e outputs", "if": "${{ always() }}", "run": "\n".join(lines) + "\n"}


def suite_config() -> dict[str, Any]:
    """The example's config with the anthropic backend (the Messages stand-in answers like the
    fake model, from the same rules)."""
    config = yaml.safe_load((EXAMPLE / "evalgate.yml").read_text(encoding="utf-8"))
    suite = config["suites"][SUITE]
    suite["model"] = {"backend": "anthropic", "name": MODEL, "max_tokens": 64, "temperature": 0}
    # 40 cases cannot rule out a 5-point drop (docs/statistics.md): a small suite's tolerance.
    suite["gate"]["tolerance"] = 0.15
    return dict(config)


def copy_build_context(dest: Path) -> None:
    """What the action's Dockerfile needs from this tree, without caches or local state."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".evalgate")
    files = ("Dockerfile", ".dockerignore", "action.yml", "constraints.txt", "pyproject.toml")
    for name in (*files, "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    shutil.copytree(ROOT / "evalgate", dest / "evalgate", ignore=ignore)
    shutil.copytree(EXAMPLE, dest / "examples" / "bike-shop", ignore=ignore)


# --------------------------------------------------------------------------- the scenario


@dataclass
class ActRun:
    name: str
    returncode: int
    output: str
    seconds: float
    model_requests: int
    """Requests the Messages stand-in received during this run."""

    @property
    def outputs(self) -> dict[str, str]:
        """What the echo step printed (``E2E-OUT name=value`` lines of act's log)."""
        found = re.findall(rf"\|\s*{OUT_PREFIX} ([A-Za-z_]+)=(.*?)\s*$", self.output, re.M)
        return dict(found)

    def why(self) -> str:
        return (
            f"act {self.name} exited {self.returncode} after {self.seconds:.0f} s; "
            f"the end of its log:\n{_tail(self.output)}"
        )


class Scenario:
    """The repository, the stand-ins and the act runs, each step done once and remembered."""

    def __init__(self, root: Path, gh: GitHubServer, messages: MessagesServer) -> None:
        self.root = root
        self.repo = root / "widgets"
        self.gh = gh
        self.messages = messages
        self.run_ids = iter(range(9_100_000_001, 9_100_001_000))
        self._done: dict[str, Any] = {}
        self.push_workflow_run: WorkflowRun | None = None
        self.baseline_file: Path | None = None
        self.heads: dict[str, str] = {}
        self.forged = 0
        self._make_repo()
        self._seed_github()

    # --- setup

    def _make_repo(self) -> None:
        repo = self.repo
        repo.mkdir()
        copy_build_context(repo)
        (repo / ".gitignore").write_text(
            ".evalgate/\n__pycache__/\n.e2e-artifacts/\n", encoding="utf-8"
        )
        suite = repo / SUITE_DIR
        self._write_suite(suite)
        action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
        self.output_names = list(action["outputs"])
        example = yaml.safe_load(EXAMPLE_WORKFLOW.read_text(encoding="utf-8"))
        workflow = derive_workflow(example, self.output_names)
        self.stub_args = write_stubs(self.root / "actions", remote_actions(workflow))
        (repo / ".github" / "workflows").mkdir(parents=True)
        (repo / ".github" / "workflows" / "evalgate.yml").write_text(
            yaml.safe_dump(workflow, sort_keys=False), encoding="utf-8"
        )
        fork_flow = derive_workflow(
            yaml.safe_load(FORK_WORKFLOW.read_text(encoding="utf-8")), self.output_names
        )
        (repo / ".github" / "workflows" / "evalgate-fork.yml").write_text(
            yaml.safe_dump(fork_flow, sort_keys=False), encoding="utf-8"
        )
        _git(repo, "init", "-q", "-b", "main")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", "evalgate with the bike-shop suite")
        _git(repo, "remote", "add", "origin", f"https://github.com/{REPO}.git")
        _git(repo, "checkout", "-q", "-b", BRANCH)
        self._change_on_branch(suite)
        _git(repo, "commit", "-q", "-am", self.pr_title)
        _git(repo, "checkout", "-q", "main")

    pr_title = "Thank the model"

    def _write_suite(self, suite: Path) -> None:
        shutil.copytree(EXAMPLE / "prompts", suite / "prompts")
        cases = (EXAMPLE / "cases.jsonl").read_text(encoding="utf-8").splitlines()[:N_CASES]
        (suite / "cases.jsonl").write_text("\n".join(cases) + "\n", encoding="utf-8")
        (suite / "evalgate.yml").write_text(
            "# The bike-shop suite on the anthropic backend (the Messages stand-in, in tests).\n"
            + yaml.safe_dump(suite_config(), sort_keys=False),
            encoding="utf-8",
        )

    def _change_on_branch(self, suite: Path) -> None:
        """The pull request's branch: a harmless edit of the shipped prompt."""
        prompt = suite / "prompts" / "v3.txt"
        prompt.write_text(
            prompt.read_text(encoding="utf-8").rstrip("\n") + "\n\nThank you.\n", encoding="utf-8"
        )

    def _suite_files(self, ref: str) -> dict[str, str]:
        names = _git(self.repo, "ls-tree", "-r", "--name-only", ref, "--", SUITE_DIR).splitlines()
        return {name: _git(self.repo, "show", f"{ref}:{name}") + "\n" for name in names}

    def _seed_github(self) -> None:
        gh = self.gh
        gh.add_token(GITHUB_TOKEN, "write")
        gh.add_repo(REPO, files={"README.md": "# widgets\n", **self._suite_files("main")})
        gh.create_branch(REPO, BRANCH)
        gh.add_commit(REPO, self._suite_files(BRANCH), branch=BRANCH, message=self.pr_title)
        gh.add_pull(REPO, head=BRANCH, number=PR, title=self.pr_title)

    # --- steps, each done once

    def step(self, name: str, make: Callable[[], T]) -> T:
        if name not in self._done:
            try:
                self._done[name] = make()
            except BaseException as exc:
                self._done[name] = exc
                raise
        value = self._done[name]
        if isinstance(value, BaseException):
            pytest.fail(f"an earlier step failed: {name}: {value!s:.2000}")
        return value  # type: ignore[no-any-return]

    def build(self) -> str:
        """``docker build`` of the repository's Dockerfile; returns the image id."""

        def make() -> str:
            _run(["docker", "build", "--tag", ACTION_IMAGE, "."], cwd=self.repo, timeout=900)
            return _image_id(ACTION_IMAGE)

        return self.step("build", make)

    def act(
        self,
        event_name: str,
        event: dict[str, Any],
        *,
        bind: bool = False,
        workflow: str = "evalgate.yml",
    ) -> ActRun:
        run_id = next(self.run_ids)
        label = f"{event_name}-{run_id}"
        event_file = self.root / f"event-{label}.json"
        event_file.write_text(json.dumps(event, indent=1), encoding="utf-8")
        args = [
            "act",
            event_name,
            "--eventpath",
            str(event_file),
            "--workflows",
            f".github/workflows/{workflow}",
            "-P",
            f"ubuntu-latest={JOB_IMAGE}",
            "--pull=false",
            "--secret",
            f"GITHUB_TOKEN={GITHUB_TOKEN}",
            "--secret",
            f"ANTHROPIC_API_KEY={ANTHROPIC_KEY}",
            "--env",
            f"GITHUB_API_URL={self.gh.url}",
            "--env",
            f"ANTHROPIC_BASE_URL={self.messages.url}",
            "--env",
            f"GITHUB_RUN_ID={run_id}",
            "--rebuild=false",
            "--no-cache-server",
            "--rm",
        ]
        args += self.stub_args
        if bind:
            args.append("--bind")
        before = len(self.messages.requests)
        t0 = time.monotonic()
        env = {**os.environ, "ACT_DISABLE_VERSION_CHECK": "1"}
        image = self.build()
        with _act_lock():
            _run(["docker", "tag", image, ACT_IMAGE], timeout=60)
            done = subprocess.run(
                args,
                cwd=self.repo,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=600,
            )
            used = _image_id(ACT_IMAGE)
        assert used == image, (
            f"{ACT_IMAGE} changed during the act run: another act run replaced it (run act "
            f"while holding {ACT_LOCK})"
        )
        seconds = time.monotonic() - t0
        (self.root / f"act-{label}.log").write_text(done.stdout, encoding="utf-8")
        if LOG_DIR:
            Path(LOG_DIR).mkdir(parents=True, exist_ok=True)
            (Path(LOG_DIR) / f"act-{label}.log").write_text(done.stdout, encoding="utf-8")
        return ActRun(
            name=label,
            returncode=done.returncode,
            output=done.stdout,
            seconds=seconds,
            model_requests=len(self.messages.requests) - before,
        )

    def _repository(self) -> dict[str, Any]:
        owner, name = REPO.split("/")
        return {
            "id": self.gh.repo(REPO).id,
            "full_name": REPO,
            "name": name,
            "owner": {"login": owner},
            "default_branch": "main",
        }

    def push_run(self, which: str = "push") -> ActRun:
        def make() -> ActRun:
            if which != "push":
                self.push_run()
            shutil.rmtree(self.repo / ".e2e-artifacts" / ARTIFACT, ignore_errors=True)
            sha = self.gh.branch_sha(REPO, "main")
            assert sha is not None
            event = {
                "ref": "refs/heads/main",
                "before": "0" * 40,
                "after": sha,
                "head_commit": {"id": sha, "message": "evalgate with the bike-shop suite"},
                "repository": self._repository(),
            }
            _git(self.repo, "checkout", "-q", "main")
            run = self.act("push", event, bind=True)
            assert run.returncode == 0, run.why()
            run_file = run.outputs.get("run_file", "")
            workspace = run.outputs.get("workspace", "")
            assert run_file and workspace, run.why()
            self.baseline_file = self.repo / Path(run_file).relative_to(workspace)
            assert self.baseline_file.is_file(), f"no run file at {self.baseline_file}"
            # What the workflow's upload-artifact step (its stand-in) took, uploaded to the
            # GitHub stand-in as the artefact of a push run on main.
            uploaded = sorted((self.repo / ".e2e-artifacts" / ARTIFACT).glob("*"))
            assert [p.name for p in uploaded] == [self.baseline_file.name], run.why()
            self.push_workflow_run = self.gh.add_workflow_run(
                REPO, event="push", head_branch="main"
            )
            self.gh.add_artifact(
                REPO,
                ARTIFACT,
                files={p.name: p.read_bytes() for p in uploaded},
                run=self.push_workflow_run,
            )
            return run

        return self.step(which, make)

    def pooled_pr_run(self) -> ActRun:
        """A new pull request (a harmless edit on its own branch) after two baseline runs."""

        def make() -> ActRun:
            self.push_run("push-2")
            branch, number = "pool-tweak", 11
            _git(self.repo, "checkout", "-q", "main")
            _git(self.repo, "checkout", "-q", "-b", branch)
            prompt = self.repo / SUITE_DIR / "prompts" / "v3.txt"
            text = prompt.read_text(encoding="utf-8") + "\nBe kind.\n"
            prompt.write_text(text, encoding="utf-8")
            _git(self.repo, "commit", "-q", "-am", "Be kind")
            self.gh.create_branch(REPO, branch)
            self.gh.add_commit(REPO, {f"{SUITE_DIR}/prompts/v3.txt": text}, branch=branch)
            self.gh.add_pull(REPO, head=branch, number=number, title="Be kind")
            shutil.rmtree(self.repo / SUITE_DIR / ".evalgate", ignore_errors=True)
            repository = self._repository()
            event = {
                "action": "opened",
                "number": number,
                "pull_request": {
                    "number": number,
                    "title": "Be kind",
                    "head": {
                        "ref": branch,
                        "sha": self.gh.branch_sha(REPO, branch),
                        "repo": repository,
                    },
                    "base": {
                        "ref": "main",
                        "sha": self.gh.branch_sha(REPO, "main"),
                        "repo": repository,
                    },
                },
                "repository": repository,
            }
            return self.act("pull_request", event)

        return self.step("pooled", make)

    def _pr_event(self) -> dict[str, Any]:
        head = self.gh.branch_sha(REPO, BRANCH)
        base = self.gh.branch_sha(REPO, "main")
        repository = self._repository()
        return {
            "action": "synchronize",
            "number": PR,
            "pull_request": {
                "number": PR,
                "title": self.pr_title,
                "head": {"ref": BRANCH, "sha": head, "repo": repository},
                "base": {"ref": "main", "sha": base, "repo": repository},
            },
            "repository": repository,
        }

    def pr_run(self, which: str) -> ActRun:
        order = ["pr-1", "pr-2", "pr-regression", "pr-cache", "pr-resplit", "pr-turns"]
        for earlier in order[: order.index(which)]:
            self.pr_run(earlier)

        def make() -> ActRun:
            self.push_run()
            # The PR runs must fetch the baseline artefact, not read what the push run left.
            shutil.rmtree(self.repo / SUITE_DIR / ".evalgate", ignore_errors=True)
            _git(self.repo, "checkout", "-q", BRANCH)
            if which == "pr-regression":
                self.plant_regression()
            if which == "pr-resplit":
                self.resplit()
            if which == "pr-turns":
                self.hide_in_earlier_turns()
            event = self._pr_event()
            self.heads[which] = event["pull_request"]["head"]["sha"]
            if which != "pr-cache":
                return self.act("pull_request", event)
            # act copies the checkout as git would (ignored files left out): the attacker's
            # .evalgate/ is committed, so the job's checkout has it.
            gitignore = self.repo / ".gitignore"
            kept = gitignore.read_text(encoding="utf-8")
            gitignore.write_text(kept.replace(".evalgate/\n", ""), encoding="utf-8")
            try:
                self.forged = self.forge_cache()
                return self.act("pull_request", event)
            finally:
                gitignore.write_text(kept, encoding="utf-8")
                shutil.rmtree(self.repo / SUITE_DIR / ".evalgate", ignore_errors=True)

        return self.step(which, make)

    def plant_regression(self) -> None:
        """Ship a prompt without the category definitions and without asking for JSON."""
        prompt = self.repo / SUITE_DIR / "prompts" / "v3.txt"
        text = "You triage messages to our bike shop. Say what kind of message it is.\n"
        prompt.write_text(text, encoding="utf-8")
        _git(self.repo, "commit", "-q", "-am", "Shorter prompt")
        self.gh.add_commit(
            REPO, {f"{SUITE_DIR}/prompts/v3.txt": text}, branch=BRANCH, message="Shorter prompt"
        )

    def fork_run(self, which: str, extra: dict[str, str]) -> ActRun:
        """The base repository's workflow_run job for the fork's pull request, whose collect
        run uploaded the harmless prompt edit (and ``extra`` files) as data."""
        from evalgate.action.fork import MANIFEST, ForkData

        def seed() -> str:
            self.gh.add_repo(FORK_REPO, fork_of=REPO)
            prompt = f"{SUITE_DIR}/prompts/v3.txt"
            text = _git(self.repo, "show", f"main:{prompt}") + "\n\nBe brief.\n"
            self.gh.add_commit(FORK_REPO, {prompt: text}, branch=FORK_BRANCH)
            self.gh.add_pull(
                REPO, head=FORK_BRANCH, head_repo=FORK_REPO, number=FORK_PR, user="forker"
            )
            return text

        def make() -> ActRun:
            self.push_run()
            prompt_text = self.step("fork-seed", seed)
            head = self.gh.branch_sha(FORK_REPO, FORK_BRANCH)
            assert head is not None
            files = {f"{SUITE_DIR}/prompts/v3.txt": prompt_text, **extra}
            data = ForkData(pull_request=FORK_PR, head_sha=head, files=files)
            run = self.gh.add_workflow_run(
                REPO,
                event="pull_request",
                head_branch=FORK_BRANCH,
                head_repo=FORK_REPO,
                name="evalgate fork data",
            )
            self.gh.add_artifact(
                REPO, "evalgate-fork", files={MANIFEST: data.model_dump_json()}, run=run
            )
            shutil.rmtree(self.repo / SUITE_DIR / ".evalgate", ignore_errors=True)
            _git(self.repo, "checkout", "-q", "main")
            event = {
                "action": "completed",
                "workflow_run": {
                    "id": run.id,
                    "event": "pull_request",
                    "head_sha": head,
                    "head_branch": FORK_BRANCH,
                    "conclusion": "success",
                    "pull_requests": [],
                },
                "repository": self._repository(),
            }
            return self.act("workflow_run", event, workflow="evalgate-fork.yml")

        return self.step(which, make)

    def forge_cache(self) -> int:
        """The attack of tests/test_hostile_state.py under act: ``.evalgate/cache/**`` in the
        pull request's checkout, holding right answers for every request the failing prompt
        will send, keyed as the unauthenticated cache keys them. Returns the files written."""
        from test_hostile_state import Forger, quiet_world

        from evalgate.app import RunOptions, plan_run
        from evalgate.config.load import load_config
        from evalgate.running.cache import ResponseCache
        from evalgate.running.suite import cases_to_run, run_suite

        loaded = load_config(self.repo / SUITE_DIR / "evalgate.yml")
        spec = plan_run(quiet_world(), loaded, SUITE, "v3", RunOptions())
        answers = {c.id: c.expected for c in cases_to_run(spec)}
        folder = self.repo / SUITE_DIR / ".evalgate" / "cache"
        forged = run_suite(
            spec, Forger(answers, "anthropic"), loaded.root, cache=ResponseCache(folder)
        )
        assert forged.cases and all(c.passed for c in forged.cases)
        return len(list(folder.rglob("*.json")))

    def hide_in_earlier_turns(self) -> None:
        """Put the default branch's config back (undo the re-split) and add new dev cases whose
        earlier turns are the holdout cases' messages."""
        config = f"{SUITE_DIR}/evalgate.yml"
        _git(self.repo, "checkout", "-q", "main", "--", config)
        cases = self.repo / SUITE_DIR / "cases.jsonl"
        added = [
            {
                "id": f"pr-{n}",
                "group": f"pr-{n}",
                "category": "other",
                "split": "dev",
                "message": "Do you sell gift cards for the shop?",
                "messages": [
                    {"role": "user", "content": text},
                    {"role": "assistant", "content": '{"category": "other"}'},
                ],
            }
            for n, text in enumerate(self.holdout_messages())
        ]
        text = cases.read_text(encoding="utf-8") + "".join(json.dumps(r) + "\n" for r in added)
        cases.write_text(text, encoding="utf-8")
        _git(self.repo, "commit", "-q", "-am", "Cases with some history")
        files = {
            config: (self.repo / config).read_text(encoding="utf-8"),
            f"{SUITE_DIR}/cases.jsonl": text,
        }
        self.gh.add_commit(REPO, files, branch=BRANCH, message="Cases with some history")

    def resplit(self) -> None:
        """The pull request's own config puts every case on the dev side."""
        path = self.repo / SUITE_DIR / "evalgate.yml"
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
        config["suites"][SUITE]["split"]["holdout_fraction"] = 0.0
        text = yaml.safe_dump(config, sort_keys=False)
        path.write_text(text, encoding="utf-8")
        _git(self.repo, "commit", "-q", "-am", "Every case to dev")
        self.gh.add_commit(
            REPO, {f"{SUITE_DIR}/evalgate.yml": text}, branch=BRANCH, message="Every case to dev"
        )

    def holdout_messages(self) -> list[str]:
        """The messages of the suite's holdout cases, as the default branch splits them."""
        from evalgate.config.load import load_config
        from evalgate.running.suite import load_suite_cases

        loaded = load_config(EXAMPLE / "evalgate.yml")
        _, suite = loaded.suite(SUITE)
        ours = {
            json.loads(line)["id"]
            for line in self._suite_files("main")[f"{SUITE_DIR}/cases.jsonl"].splitlines()
            if line.strip()
        }
        cases = load_suite_cases(loaded, suite).cases
        return [str(c.input["message"]) for c in cases if c.split == "holdout" and c.id in ours]


@pytest.fixture(scope="module")
def e2e(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    if UNAVAILABLE is not None:
        pytest.fail(f"EVALGATE_CONTAINER=required, but {UNAVAILABLE}")
    rules = load_rules({"rules_file": "fake-rules.yml"}, EXAMPLE)
    root = tmp_path_factory.mktemp("container-e2e")
    with (
        GitHubServer() as gh,
        MessagesServer(rules, Knobs(api_key=ANTHROPIC_KEY)) as messages,
    ):
        yield Scenario(root, gh, messages)
        assert messages.errors == [], messages.errors[0]


def _comments(e2e: Scenario) -> list[Any]:
    return [c for c in e2e.gh.comments(REPO, PR) if marker(SUITE) in c.body]


def _no_secrets(run: ActRun) -> None:
    for secret in (GITHUB_TOKEN, ANTHROPIC_KEY):
        assert secret not in run.output, f"a secret appears in act's log of {run.name}"


# --------------------------------------------------------------------------- the tests


def test_the_action_image_builds(e2e: Scenario) -> None:
    e2e.build()
    inspect = _run(["docker", "image", "inspect", ACTION_IMAGE, "--format", "{{json .Config}}"])
    config = json.loads(inspect.stdout)
    assert config["Entrypoint"] == ["/opt/evalgate/venv/bin/python", "-m", "evalgate", "action"]
    version = _run(
        [
            "docker",
            "run",
            "--rm",
            "--entrypoint",
            "/opt/evalgate/venv/bin/python",
            ACTION_IMAGE,
            "-c",
            "import evalgate; print(evalgate.__version__)",
        ],
        timeout=120,
    )
    assert version.stdout.strip() == evalgate.__version__
    # The loopback stand-ins are test support: neither as sources nor as byte code in the image.
    stand_ins = _run(
        [
            "docker",
            "run",
            "--rm",
            "--entrypoint",
            "/usr/bin/find",
            ACTION_IMAGE,
            "/opt/evalgate",
            "-name",
            "*_server.py*",
        ],
        timeout=120,
    )
    assert stand_ins.stdout.strip() == ""


OPENAI_MODEL = "gpt-4o-mini"
OPENAI_KEY = "sk-EvalgateContainerE2eFakeOpenAIKey-8Vd3Qs"


def openai_workspace(folder: Path) -> Path:
    """The bike-shop suite on the openai backend (an OpenAI-compatible server: the stand-in
    answers like the fake model, from the same rules), as the action's workspace holds it."""
    shutil.copytree(EXAMPLE / "prompts", folder / "prompts")
    cases = (EXAMPLE / "cases.jsonl").read_text(encoding="utf-8").splitlines()[:N_CASES]
    (folder / "cases.jsonl").write_text("\n".join(cases) + "\n", encoding="utf-8")
    config = suite_config()
    config["suites"][SUITE]["model"] = {
        "backend": "openai",
        "name": OPENAI_MODEL,
        "max_tokens": 64,
        "temperature": 0,
    }
    (folder / "evalgate.yml").write_text(yaml.safe_dump(config, sort_keys=False), "utf-8")
    return folder / "evalgate.yml"


def test_the_image_runs_an_openai_suite(e2e: Scenario, tmp_path: Path) -> None:
    """Every backend evalgate ships runs in the action's image: an openai suite, run by the
    image's own evalgate against an OpenAI-compatible stand-in on the host's loopback."""
    image = e2e.build()
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    openai_workspace(workspace)
    rules = load_rules({"rules_file": "fake-rules.yml"}, EXAMPLE)
    with OpenAIServer(rules) as server:
        done = _run(
            [
                "docker",
                "run",
                "--rm",
                "--network",
                "host",
                "--volume",
                f"{workspace}:/github/workspace:ro",
                "--env",
                f"OPENAI_API_KEY={OPENAI_KEY}",
                "--env",
                f"OPENAI_BASE_URL={server.url}",
                "--entrypoint",
                "/opt/evalgate/venv/bin/python",
                image,
                "-m",
                "evalgate",
                "run",
                "v3",
                "--config",
                "/github/workspace/evalgate.yml",
                "--no-save",
                "--json",
            ],
            timeout=300,
        )
        bodies = list(server.bodies)
    # stdout and stderr are one stream here: the JSON document is its last object.
    document = json.loads(done.stdout[done.stdout.index("{\n") :])
    assert (document["backend"], document["model"]) == ("openai", OPENAI_MODEL)
    # The dev and regression cases of the 40 (the holdout is the release job's).
    assert 0 < document["n"] < N_CASES and document["errors"] == 0, document
    assert document["accuracy"]["rate"] > 0.5
    # Every answer came from the stand-in, reached from the container over host networking.
    assert len(bodies) == document["n"]
    assert {b["model"] for b in bodies} == {OPENAI_MODEL}
    assert OPENAI_KEY not in done.stdout


def test_a_push_run_writes_the_baseline_file(e2e: Scenario) -> None:
    run = e2e.push_run()
    _no_secrets(run)
    assert "Success - Main actions/checkout" in run.output
    assert "docker build" not in run.output  # act ran the image the test built
    # The job container uses the host's network and the action's container shares it: that is
    # how the action reaches the stand-ins on 127.0.0.1 (checked below by what they received).
    assert 'network="host"' in run.output
    out = run.outputs
    assert out["verdict"] == "pass", run.why()
    assert out["outcome"] == "success"
    assert float(out["accuracy"]) > 0.5
    assert e2e.baseline_file is not None
    baseline = read_run(e2e.baseline_file)
    assert (baseline.model.backend, baseline.model.name) == ("anthropic", MODEL)
    assert baseline.suite == SUITE
    assert not baseline.incomplete
    repeats = {len(case.outcomes) for case in baseline.cases}
    assert repeats == {2}, "the baseline measures the noise floor with baseline_repeats: 2"
    # Every answer came from the Messages stand-in, reached from the container over host
    # networking, with the key passed as a secret (the stand-in refuses any other key).
    assert run.model_requests == 2 * len(baseline.cases)
    exchanges = e2e.messages.requests[-run.model_requests :]
    assert {(x.status, x.outcome) for x in exchanges} == {(200, "ok")}
    assert {x.body["model"] for x in exchanges} == {MODEL}
    # The baseline job talks to GitHub only to keep the baseline in the data branch's history,
    # what it spent beside it, and to ask which pull request the pushed commit merged and which
    # were closed without merging (whose spend their comments carry).
    used = {r.path for r in e2e.gh.find_requests(path="/repos/*")}
    history = f"/repos/{REPO}/contents/evalgate/{SUITE}/baselines.jsonl"
    spend = f"/repos/{REPO}/contents/evalgate/{SUITE}/spend.jsonl"
    commit = f"/repos/{REPO}/commits/{e2e.gh.branch_sha(REPO, 'main')}"
    pulls = f"/repos/{REPO}/pulls"
    assert {history, spend, f"{commit}/pulls", pulls} <= used, used
    allowed = (f"/repos/{REPO}", history, spend, commit, f"{commit}/pulls", pulls)
    assert all(p in allowed or "/git/ref" in p for p in used), used
    # The workflow's upload step took the file the run_file output names.
    assert f"E2E-ARTIFACT {ARTIFACT} {e2e.baseline_file.name}" in run.output


def test_a_pull_request_run_posts_one_comment_and_sets_the_outputs(e2e: Scenario) -> None:
    run = e2e.pr_run("pr-1")
    assert run.returncode == 0, run.why()
    _no_secrets(run)
    comments = _comments(e2e)
    assert len(comments) == 1
    comment = comments[0]
    assert comment.user == BOT_LOGIN
    assert "passed" in comment.body
    assert e2e.push_workflow_run is not None
    assert f"/actions/runs/{e2e.push_workflow_run.id}" in comment.body  # the artefact's run
    out = run.outputs
    assert out["verdict"] == "pass", run.why()
    assert out["outcome"] == "success"
    assert 0.5 < float(out["accuracy"]) <= 1.0
    assert out["baseline_accuracy"] == out["accuracy"]  # the same answers on both sides
    assert float(out["p_value"]) == pytest.approx(1.0)
    assert (out["fixed"], out["broken"]) == ("0", "0")
    assert float(out["mde"]) > 0
    assert out["comment_url"].endswith(f"/pull/{PR}#issuecomment-{comment.id}")
    assert run.model_requests > 0  # the PR's prompt ran against the model, not a cache
    # The baseline came from the push run's artefact: its workflow runs listed (by branch and
    # event), the run's artefacts listed, fetched, downloaded without the token from storage.
    assert e2e.gh.find_requests("GET", f"/repos/{REPO}/actions/*runs")
    assert e2e.gh.find_requests("GET", f"/repos/{REPO}/actions/runs/*/artifacts")
    assert e2e.gh.find_requests("GET", f"/repos/{REPO}/actions/artifacts/*/zip")
    stored = e2e.gh.find_requests("GET", server="storage")
    assert stored and not any(r.has_authorization for r in stored)
    assert len(e2e.gh.find_requests("POST", f"/repos/{REPO}/issues/{PR}/comments")) == 1


def test_a_second_run_edits_the_comment_instead_of_adding_one(e2e: Scenario) -> None:
    e2e.pr_run("pr-1")
    before = _comments(e2e)
    run = e2e.pr_run("pr-2")
    assert run.returncode == 0, run.why()
    _no_secrets(run)
    after = _comments(e2e)
    assert len(after) == 1
    assert after[0].id == before[0].id
    assert "passed" in after[0].body
    assert run.outputs["comment_url"].endswith(f"#issuecomment-{after[0].id}")
    assert len(e2e.gh.find_requests("POST", f"/repos/{REPO}/issues/{PR}/comments")) == 1
    patches = e2e.gh.find_requests("PATCH", f"/repos/{REPO}/issues/comments/{after[0].id}")
    assert len(patches) == 1
    assert patches[0].status == 200


def test_a_planted_regression_fails_the_job(e2e: Scenario) -> None:
    run = e2e.pr_run("pr-regression")
    assert run.returncode != 0, "a failed gate must fail the job (and act's exit code)"
    _no_secrets(run)
    out = run.outputs
    assert out["verdict"] == "fail", run.why()
    assert out["outcome"] == "failure"
    assert int(out["broken"]) > 0
    assert float(out["accuracy"]) < float(out["baseline_accuracy"])
    assert "::error title=evalgate::bike-shop: FAIL" in run.output
    assert re.search(r"FAILURE`?:?\s*1\b", run.output), "the action exits 1 on a failed gate"
    comments = _comments(e2e)
    assert len(comments) == 1, "still one comment: the failing run edits it too"
    assert "failed the gate" in comments[0].body
    assert len(e2e.gh.find_requests("POST", f"/repos/{REPO}/issues/{PR}/comments")) == 1
    assert len(e2e.gh.find_requests("PATCH", f"/repos/{REPO}/issues/comments/*")) == 2


def test_a_committed_response_cache_does_not_forge_the_verdict(e2e: Scenario) -> None:
    # The failing prompt of pr-regression, with .evalgate/cache/** committed beside it holding
    # right answers for every request it sends: the job ignores the folder, calls the model
    # for every dev case, and the verdict is the prompt's own.
    hidden = e2e.holdout_messages()
    run = e2e.pr_run("pr-cache")
    assert e2e.forged > 0
    assert run.returncode != 0, run.why()
    _no_secrets(run)
    assert run.outputs["verdict"] == "fail", run.why()
    dev = N_CASES - len(hidden)
    assert run.model_requests >= dev, (run.model_requests, dev)
    assert re.search(r"cache: [1-9]\d* hits", run.output) is None
    comment = _comments(e2e)[0].body
    assert "failed the gate" in comment
    assert ".evalgate/" in comment and "the job ignored it" in comment


def test_a_pull_request_that_re_splits_sends_no_holdout_case(e2e: Scenario) -> None:
    hidden = e2e.holdout_messages()
    assert len(hidden) >= 5
    run = e2e.pr_run("pr-resplit")
    assert run.returncode != 0, "a pull request that changes the holdout must fail the job"
    _no_secrets(run)
    assert run.outputs["verdict"] == "inconclusive", run.why()
    # The dev cases ran (on the default branch's split); no holdout case did.
    assert run.model_requests > 0
    sent = [json.dumps(x.body) for x in e2e.messages.requests[-run.model_requests :]]
    assert [m for m in hidden for body in sent if json.dumps(m)[1:-1] in body] == []
    comment = _comments(e2e)[0].body
    assert "this pull request changes the holdout" in comment
    for message in hidden:
        assert message not in comment and message not in run.output
    assert "changes the holdout" in run.output


def test_holdout_text_in_earlier_turns_is_never_sent(e2e: Scenario) -> None:
    hidden = e2e.holdout_messages()
    run = e2e.pr_run("pr-turns")
    assert run.returncode != 0, run.why()
    _no_secrets(run)
    assert run.outputs["verdict"] == "inconclusive", run.why()
    sent = [json.dumps(x.body) for x in e2e.messages.requests[-run.model_requests :]]
    sent = sent if run.model_requests else []
    assert [m for m in hidden for body in sent if json.dumps(m)[1:-1] in body] == []
    assert re.search(r"earlier turns of case pr-\d+ carry a holdout case", run.output)
    comment = _comments(e2e)[0].body
    assert re.search(r"earlier turns of case pr-\d+ carry a holdout case", comment)
    for message in hidden:
        assert message not in comment and message not in run.output


def test_a_failing_pull_request_has_a_failed_check_with_annotations(e2e: Scenario) -> None:
    e2e.pr_run("pr-regression")
    checks = [c for c in e2e.gh.check_runs(REPO) if c.name == "evalgate"]
    # pr-regression's head, and pr-cache's (the same commit, with a forged cache beside it).
    failing = [c for c in checks if c.head_sha == e2e.heads["pr-regression"]]
    assert failing and {c.conclusion for c in failing} == {"failure"}, [
        (c.head_sha, c.conclusion) for c in checks
    ]
    notes = failing[0].annotations
    assert notes and all(n["path"] == f"{SUITE_DIR}/cases.jsonl" for n in notes)
    assert all(n["annotation_level"] == "failure" for n in notes)


def test_a_fork_pull_request_gets_a_verdict_through_workflow_run(e2e: Scenario) -> None:
    run = e2e.fork_run("fork", {})
    assert run.returncode == 0, run.why()
    _no_secrets(run)
    assert run.outputs["verdict"] == "pass", run.why()
    assert run.model_requests > 0
    [comment] = [c for c in e2e.gh.comments(REPO, FORK_PR) if marker(SUITE) in c.body]
    assert "passed" in comment.body
    head = e2e.gh.branch_sha(FORK_REPO, FORK_BRANCH)
    assert [(c.head_sha, c.conclusion) for c in e2e.gh.check_runs(REPO) if c.head_sha == head] == [
        (head, "success")
    ]


def test_fork_data_that_changes_the_config_is_refused_under_act(e2e: Scenario) -> None:
    e2e.fork_run("fork", {})
    run = e2e.fork_run("fork-config", {f"{SUITE_DIR}/evalgate.yml": "version: 1\nsuites: {}\n"})
    assert run.returncode != 0, run.why()
    assert run.model_requests == 0
    bodies = [c.body for c in e2e.gh.comments(REPO, FORK_PR) if marker(SUITE) in c.body]
    assert len(bodies) == 1 and "was refused" in bodies[0]
    assert "evalgate.yml" in bodies[0]


# --------------------------------------------------------------------------- a judge change

JUDGED = "bike-shop-judged"
JUDGE_FILES = ("judge-labels.jsonl", "judge-rules.yml", "judge-rubric.txt", "fake-rules.yml")


class JudgeScenario(Scenario):
    """The bundled example's judged suite (the offline fake model and fake judge, judge.yml as
    the suite's evalgate.yml); the pull request adds a sentence to the rubric that makes the
    judge pass replies people fail (see tests/action/test_judge_pr.py, which shows the same in-process)."""

    pr_title = "Let the judge accept categories in prose"

    def _write_suite(self, suite: Path) -> None:
        shutil.copytree(EXAMPLE / "prompts", suite / "prompts")
        for name in ("cases.jsonl", *JUDGE_FILES):
            shutil.copy2(EXAMPLE / name, suite / name)
        shutil.copy2(EXAMPLE / "judge.yml", suite / "evalgate.yml")

    def _change_on_branch(self, suite: Path) -> None:
        rubric = suite / "judge-rubric.txt"
        text = rubric.read_text(encoding="utf-8") + "A category named in prose also passes.\n"
        rubric.write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def judge_e2e(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    if UNAVAILABLE is not None:
        pytest.fail(f"EVALGATE_CONTAINER=required, but {UNAVAILABLE}")
    rules = load_rules({"rules_file": "fake-rules.yml"}, EXAMPLE)
    root = tmp_path_factory.mktemp("container-e2e-judge")
    with (
        GitHubServer() as gh,
        MessagesServer(rules, Knobs(api_key=ANTHROPIC_KEY)) as messages,
    ):
        yield JudgeScenario(root, gh, messages)


def test_a_rubric_change_that_lowers_agreement_fails_the_job(judge_e2e: Scenario) -> None:
    run = judge_e2e.pr_run("pr-1")
    assert run.returncode != 0, "a judge change that lowers agreement must fail the job"
    _no_secrets(run)
    assert run.outputs["verdict"] == "fail", run.why()
    assert f"::error title=evalgate::{JUDGED}: FAIL: the judge change lowers" in run.output
    assert run.model_requests == 0, "the judged suite is offline"
    [comment] = [c for c in judge_e2e.gh.comments(REPO, PR) if marker(JUDGED) in c.body]
    assert "**Agreement dropped significantly**" in comment.body
    # The base judge read the base commit's rubric through the contents API.
    base = judge_e2e.gh.branch_sha(REPO, "main")
    fetched = judge_e2e.gh.find_requests(
        "GET", f"/repos/{REPO}/contents/{SUITE_DIR}/judge-rubric.txt"
    )
    assert fetched and all(r.query.get("ref") == [base] for r in fetched)
    # Both judges' reads of the holdout labels (the changed one's and the base branch's) are
    # kept in the suite's read ledger on the data branch, and the comment counts them.
    kept = judge_e2e.gh.file(REPO, f"evalgate/{JUDGED}/holdout-ledger.jsonl", ref="evalgate-data")
    assert kept is not None, "the holdout label reads must be kept on the data branch"
    records = [json.loads(line) for line in kept.decode("utf-8").splitlines()]
    assert [r["purpose"] for r in records] == ["judge check", "judge check"]
    assert "Holdout label reads: 2 (budget 10)" in comment.body


def test_a_pull_request_pools_two_baseline_runs(e2e: Scenario) -> None:
    run = e2e.pooled_pr_run()
    assert run.returncode == 0, run.why()
    history = e2e.gh.file(REPO, f"evalgate/{SUITE}/baselines.jsonl", ref="evalgate-data")
    assert history is not None and len(history.decode().splitlines()) == 2
    [comment] = [c for c in e2e.gh.comments(REPO, 11) if marker(SUITE) in c.body]
    assert "pools 2 baseline runs of this prompt, cases and model (4 repeats a case)" in (
        comment.body
    )
