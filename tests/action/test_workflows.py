"""The workflows this repository ships, and the prebuilt image action.yml names, kept in step.

A release tag builds and publishes the image; action.yml on that commit must name exactly that
image, so the version in pyproject.toml, the image tag in action.yml and what the release
workflow pushes are checked together here. Every action a workflow uses is pinned by commit.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

import evalgate

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = [
    *sorted((ROOT / ".github" / "workflows").glob("*.yml")),
    ROOT / "examples" / "workflows" / "evalgate.yml",
]


def load(path: Path) -> dict[str, Any]:
    data: dict[Any, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    if True in data:  # YAML 1.1 reads the key `on` as true
        data["on"] = data.pop(True)
    return data


def version() -> str:
    """The version: written once, in evalgate/__init__.py, which pyproject.toml reads."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "evalgate.__version__"}
    return evalgate.__version__


def action_image() -> str:
    action = load(ROOT / "action.yml")
    assert action["runs"]["using"] == "docker"
    return str(action["runs"]["image"])


def test_action_yml_names_the_prebuilt_image_of_this_version() -> None:
    assert action_image() == f"docker://ghcr.io/evalgate/evalgate:v{version()}"


def test_the_release_workflow_publishes_that_image_for_both_platforms() -> None:
    flow = load(ROOT / ".github" / "workflows" / "release.yml")
    assert flow["on"] == {"push": {"tags": ["v*"]}}
    assert flow["permissions"] == {"contents": "read"}
    [job] = flow["jobs"].values()
    # Least privilege: packages: write for the job that pushes, nothing else writable.
    assert job["permissions"] == {"contents": "read", "packages": "write"}
    steps = job["steps"]
    build = next(s for s in steps if str(s.get("uses", "")).startswith("docker/build-push"))
    assert build["with"]["push"] is True
    assert set(build["with"]["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert build["with"]["tags"] == "${{ steps.name.outputs.image }}"
    # The tag check computes that name as action.yml spells it, and refuses any other.
    check = next(s for s in steps if s.get("id") == "name")
    assert 'image="ghcr.io/${REPOSITORY,,}:${TAG}"' in check["run"]
    assert 'grep -qxF "  image: docker://${image}" action.yml' in check["run"]
    owner_repo, _, tag = action_image().removeprefix("docker://ghcr.io/").partition(":")
    line = f"  image: docker://ghcr.io/{owner_repo}:{tag}"
    assert line in (ROOT / "action.yml").read_text(encoding="utf-8").splitlines()
    assert any("digest" in str(s.get("run", "")) for s in steps)


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_action_is_pinned_by_commit(path: Path) -> None:
    for job in load(path)["jobs"].values():
        for step in job.get("steps", []):
            uses = str(step.get("uses", ""))
            if not uses or uses.startswith(("./", "docker://")):
                continue
            name, _, ref = uses.partition("@")
            if name.startswith("evalgate/"):
                continue  # this action itself, by its release tag, in the example
            assert re.fullmatch(r"[0-9a-f]{40}", ref), f"{path.name}: {uses} is not pinned"


def test_the_self_test_builds_the_checkout_not_the_released_image() -> None:
    flow = load(ROOT / ".github" / "workflows" / "self-test.yml")
    for job in flow["jobs"].values():
        steps = job["steps"]
        local = [i for i, s in enumerate(steps) if s.get("uses") == "./"]
        assert local
        for i in local:
            rewrite = [s for s in steps[:i] if "image: Dockerfile" in str(s.get("run", ""))]
            assert rewrite, "the self-test must build this checkout's Dockerfile"


def _permissions(path: Path) -> dict[str, dict[str, str]]:
    return {name: job.get("permissions", {}) for name, job in load(path)["jobs"].items()}


def test_the_example_workflow_init_and_the_readme_agree_on_permissions(tmp_path: Path) -> None:
    """What a user copies (the example), what `evalgate init` writes, and what docs/action.md
    says each job needs: one set of permissions."""
    from evalgate.setup.init import _workflow_text

    example = _permissions(ROOT / "examples" / "workflows" / "evalgate.yml")
    written = tmp_path / "evalgate.yml"
    written.write_text(_workflow_text("evalgate.yml", ["anthropic"], "main"), encoding="utf-8")
    assert _permissions(written) == example
    assert example["gate"] == {
        "contents": "read",
        "pull-requests": "write",
        "checks": "write",
        "actions": "read",
    }
    assert example["baseline"]["contents"] == "write"
    readme = (ROOT / "docs" / "action.md").read_text(encoding="utf-8")
    assert (
        "`permissions: contents: read, pull-requests: write, checks: write,\n  actions: read`"
        in (readme)
    )
    assert example["baseline"]["pull-requests"] == "read"
    assert (
        "(`contents: write` for the baseline\n  history, `pull-requests: read` for what the merged"
        " pull request spent)" in readme
    )
