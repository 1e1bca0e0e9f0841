"""What the distribution holds: the product, its data and templates, never the test stand-ins."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from evalgate.setup.image import IMAGE_EXTRAS

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    # Built from a copy of what the distribution is made of: a build folder left in the
    # checkout (setuptools never cleans it) must not lend the wheel stale modules.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "evalgate", source / "evalgate", ignore=shutil.ignore_patterns("__pycache__")
    )
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(source)],
        check=True,
        timeout=600,
    )
    (wheel,) = out.glob("pr_evalgate-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_the_wheel_holds_no_stand_in(wheel_names: list[str]) -> None:
    servers = [name for name in wheel_names if name.endswith("_server.py")]
    assert servers == []
    assert not [name for name in wheel_names if name.startswith(("tests/", "evalgate/testing"))]


def test_the_wheel_holds_the_package_data(wheel_names: list[str]) -> None:
    assert "evalgate/cli/__init__.py" in wheel_names
    assert "evalgate/py.typed" in wheel_names
    assert any(name.startswith("evalgate/report/templates/") for name in wheel_names)
    assert any(name.startswith("evalgate/bundled/bike-shop/") for name in wheel_names)


def test_no_product_module_imports_the_stand_ins() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "evalgate").rglob("*.py")
        if "tests.support" in path.read_text(encoding="utf-8")
    ]
    assert offenders == []


def _name(requirement: str) -> str:
    """A requirement's project name, normalised as the package index does (PEP 503)."""
    name = re.split(r"[\s\[<>=!~;@]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_image_pins_every_dependency_of_every_backend() -> None:
    """The image installs constraints.txt: every core dependency and every requirement of the
    extras it installs (IMAGE_EXTRAS) is pinned there, so each backend imports in the image."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
    pins = {
        _name(line): line.split("==", 1)[1]
        for line in lines
        if line and not line.startswith("#") and "==" in line
    }
    wanted = list(project["dependencies"])
    for extra in IMAGE_EXTRAS:
        wanted += project["optional-dependencies"][extra]
    assert "openai" in IMAGE_EXTRAS
    assert sorted(_name(r) for r in wanted if _name(r) not in pins) == []
    assert not [line for line in lines if "evalgate" in line], "the project pins itself"


def test_the_dockerfile_installs_the_image_extras() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    extras = re.findall(r'"/opt/evalgate/src\[([a-z,]+)\]"', dockerfile)
    assert extras == [",".join(IMAGE_EXTRAS)]
    assert "pip install --no-compile -q -r /opt/evalgate/constraints.txt" in dockerfile
