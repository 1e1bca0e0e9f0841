"""The docs build as a site: `mkdocs build --strict` (MkDocs with the Material theme) fails on
a broken link or anchor, a page left out of the navigation, or a missing page."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def build(tmp_path: Path, edit: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A strict build of a copy of the docs (so that nothing is written into the checkout),
    with ``edit``'s pages (name -> text appended; a new name is a new page) changed first.
    Not --quiet: strict mode fails on the warnings it sees, and --quiet hides them."""
    source = tmp_path / "source"
    shutil.copytree(ROOT / "docs", source / "docs")
    shutil.copy(ROOT / "mkdocs.yml", source / "mkdocs.yml")
    for name, text in (edit or {}).items():
        page = source / "docs" / name
        old = page.read_text(encoding="utf-8") if page.exists() else ""
        page.write_text(old + text, encoding="utf-8")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "NO_COLOR": "1"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(source / "mkdocs.yml"),
            "-d",
            str(tmp_path / "site"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_the_docs_build_strictly(tmp_path: Path) -> None:
    done = build(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "configuration" / "index.html").is_file()
    assert (tmp_path / "site" / "action" / "index.html").is_file()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"index.md": "\nSee [nowhere](no-such-page.md).\n"}, "no-such-page.md"),
        ({"index.md": "\nSee [the tests](statistics.md#no-such-anchor).\n"}, "no-such-anchor"),
        ({"action.md": "\nSee [the inputs](#no-such-heading).\n"}, "no-such-heading"),
    ],
    ids=["page", "anchor", "own anchor"],
)
def test_a_broken_link_fails_the_build(tmp_path: Path, edit: dict[str, str], message: str) -> None:
    done = build(tmp_path, edit)
    assert done.returncode != 0
    assert message in done.stdout + done.stderr


def test_a_page_left_out_of_the_navigation_fails_the_build(tmp_path: Path) -> None:
    done = build(tmp_path, {"orphan.md": "# An orphan page\n"})
    assert done.returncode != 0
    assert "orphan.md" in done.stdout + done.stderr
