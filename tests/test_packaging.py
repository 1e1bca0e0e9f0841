"""What the distribution holds: the product, its data and templates, never the test stand-ins."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

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
