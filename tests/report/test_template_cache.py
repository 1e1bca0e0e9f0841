"""Compiled report templates kept between commands: the folder, when it is trusted, and that a
cached entry is used, refreshed when its source changes, and never shared between HTML and text.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jinja2
import pytest

from evalgate.report import render, template_cache


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    folder = tmp_path / "cache"
    template_cache.configure({template_cache.VARIABLE: str(folder)})
    return folder


def _env(templates: dict[str, str], **settings: object) -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.DictLoader(templates), **settings)  # type: ignore[arg-type]


def test_the_folder_the_environment_names() -> None:
    folder = template_cache.folder
    assert folder({"EVALGATE_TEMPLATE_CACHE": "/x/y"}) == Path("/x/y")
    assert folder({"EVALGATE_TEMPLATE_CACHE": "off", "HOME": "/h"}) is None
    assert folder({"EVALGATE_TEMPLATE_CACHE": "", "HOME": "/h"}) is None
    assert folder({"XDG_CACHE_HOME": "/c", "HOME": "/h"}) == Path("/c/evalgate/templates")
    assert folder({"HOME": "/h"}) == Path("/h/.cache/evalgate/templates")
    assert folder({}) is None


def test_a_missing_folder_is_made_private(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "b"
    assert template_cache.trusted(folder)
    assert folder.is_dir() and (folder.stat().st_mode & 0o777) == 0o700


@pytest.mark.parametrize("mode", [0o770, 0o702, 0o777])
def test_a_folder_others_can_write_is_not_trusted(tmp_path: Path, mode: int) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(mode)
    assert not template_cache.trusted(folder)
    template_cache.configure({template_cache.VARIABLE: str(folder)})
    env = _env({"t": "x"})
    template_cache.attach(env, "text")
    assert env.bytecode_cache is None


def test_a_file_a_relative_path_or_a_folder_below_anothers_is_not_trusted(
    tmp_path: Path,
) -> None:
    afile = tmp_path / "file"
    afile.write_text("")
    assert not template_cache.trusted(afile)
    assert not template_cache.trusted(afile / "below")
    assert not template_cache.trusted(Path("relative/templates"))
    # A folder anyone may write (not sticky) above the cache: they could swap the cache for a
    # link to entries of their own between the check and the read.
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert not template_cache.trusted(shared / "templates")
    assert not (shared / "templates").exists()
    # A sticky one (as /tmp) is safe: no one else can move what is in it.
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    assert template_cache.trusted(sticky / "templates")


def test_a_link_is_followed_only_where_no_one_else_could_swap_it(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    assert template_cache.trusted(link)  # as /var -> /private/var: its folder is this user's
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    open_folder.chmod(0o777)
    target = open_folder / "target"
    target.mkdir(mode=0o700)
    via = tmp_path / "via"
    via.symlink_to(target)
    assert not template_cache.trusted(via)  # it resolves below a folder anyone may write


def test_a_checkout_is_never_the_cache(tmp_path: Path) -> None:
    # A pull request's committed files are owned by the job's user: ownership says nothing.
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    planted = checkout / ".cache" / "evalgate" / "templates"
    planted.mkdir(parents=True, mode=0o700)
    assert not template_cache.trusted(planted)
    workspace = tmp_path / "workspace"
    inside = workspace / "cache"
    inside.mkdir(parents=True, mode=0o700)
    assert not template_cache.trusted(inside, {"GITHUB_WORKSPACE": str(workspace)})
    assert template_cache.trusted(inside, {"GITHUB_WORKSPACE": str(tmp_path / "elsewhere")})


def _compiles(source: str, **context: Any) -> tuple[str, int]:
    """What a fresh environment with the cache renders of ``source``, and how often it
    compiled (0: it read the cache's entry)."""
    env = _env({"t": source})
    template_cache.attach(env, "text")
    count = 0
    real_compile = env.compile

    def compiled(*args: Any, **kwargs: Any) -> Any:
        nonlocal count
        count += 1
        return real_compile(*args, **kwargs)

    env.compile = compiled  # type: ignore[method-assign]
    return env.get_template("t").render(**context), count


def test_an_entry_that_is_a_link_or_anothers_is_not_read(cache: Path) -> None:
    assert _compiles("{{ a }}", a=1) == ("1", 1)
    assert _compiles("{{ a }}", a=1) == ("1", 0)  # read from the cache
    [entry] = list(cache.iterdir())
    planted = cache.parent / "planted"
    planted.write_bytes(entry.read_bytes())
    entry.unlink()
    entry.symlink_to(planted)
    assert _compiles("{{ a }}", a=2) == ("2", 1)  # the link was not read
    # An entry others can write is not read either.
    entry.unlink()
    entry.write_bytes(planted.read_bytes())
    entry.chmod(0o666)
    assert _compiles("{{ a }}", a=3) == ("3", 1)


def test_a_cached_template_is_not_compiled_again(cache: Path) -> None:
    first = _env({"t": "{{ a }}-{{ b }}"})
    template_cache.attach(first, "text")
    assert first.get_template("t").render(a=1, b=2) == "1-2"
    assert [p.name.startswith("text-") for p in cache.iterdir()] == [True]

    second = _env({"t": "{{ a }}-{{ b }}"})
    template_cache.attach(second, "text")

    def no_compiling(*args: object, **kwargs: object) -> None:
        raise AssertionError("compiled although the cache holds it")

    second.compile = no_compiling  # type: ignore[method-assign]
    assert second.get_template("t").render(a=3, b=4) == "3-4"


def test_a_changed_source_is_compiled_again(cache: Path) -> None:
    old = _env({"t": "old {{ a }}"})
    template_cache.attach(old, "text")
    assert old.get_template("t").render(a=1) == "old 1"
    new = _env({"t": "new {{ a }}"})
    template_cache.attach(new, "text")
    assert new.get_template("t").render(a=1) == "new 1"


@pytest.mark.parametrize("kinds", [("text", "html"), ("html", "html")], ids=["kinds", "settings"])
def test_html_never_runs_a_template_compiled_without_escaping(
    cache: Path, kinds: tuple[str, str]
) -> None:
    # The same name and source, compiled first where nothing is escaped: under another kind,
    # or under the same kind with other settings (an older evalgate's, say).
    text = _env({"page": "{{ v }}"})
    template_cache.attach(text, kinds[0])
    assert text.get_template("page").render(v="<script>") == "<script>"
    html = _env({"page": "{{ v }}"}, autoescape=True)
    template_cache.attach(html, kinds[1])
    assert html.get_template("page").render(v="<script>") == "&lt;script&gt;"
    assert template_cache.settings_digest(text, "html") != template_cache.settings_digest(
        html, "html"
    )
    assert len(list(cache.iterdir())) == 2


def test_writing_an_entry_removes_only_old_entries(cache: Path) -> None:
    import time

    env = _env({"a": "{{ a }}", "b": "{{ b }}"})
    template_cache.attach(env, "text")
    env.get_template("a").render(a=1)
    [kept] = list(cache.iterdir())
    month_ago = time.time() - template_cache.PRUNE_AFTER - 60
    old = cache / ("text-" + "0" * 16 + "-" + "1" * 40 + ".jinja")  # an older version's
    old.write_bytes(b"x")
    recent = cache / ("html-" + "0" * 16 + "-" + "2" * 40 + ".jinja")
    recent.write_bytes(b"x")
    other = cache / "notes.txt"  # not an entry: never touched
    other.write_bytes(b"x")
    target = cache.parent / "elsewhere"
    target.write_bytes(b"x")
    link = cache / ("text-" + "0" * 16 + "-" + "3" * 40 + ".jinja")
    link.symlink_to(target)
    for path in (kept, old, other):
        os.utime(path, (month_ago, month_ago))
    os.utime(link, (month_ago, month_ago), follow_symlinks=False)

    env.get_template("b").render(b=2)  # a new entry is written: the old one goes
    names = {p.name for p in cache.iterdir()}
    assert old.name not in names
    assert kept.name not in names  # written a month ago, though read since
    assert {recent.name, other.name, link.name} <= names and target.exists()
    assert len(names) == 4  # those three and the entry just written
    # Nothing old is left: nothing more is removed.
    assert template_cache.prune(cache) == 0


def test_a_folder_that_cannot_be_written_only_costs_compiling(cache: Path) -> None:
    env = _env({"t": "{{ a }}"})
    template_cache.attach(env, "text")
    os.rmdir(cache)  # gone after it was chosen: every write fails
    assert env.get_template("t").render(a=5) == "5"


def test_off_compiles_every_time() -> None:
    template_cache.configure({template_cache.VARIABLE: "off"})
    env = _env({"t": "x"})
    template_cache.attach(env, "text")
    assert env.bytecode_cache is None


def test_every_report_template_compiles_into_the_cache(tmp_path: Path) -> None:
    # As the image's build does it, in a process of its own (one whose templates are already
    # in memory would not compile them again).
    folder = tmp_path / "image"
    code = (
        "from evalgate.report import render, template_cache as c\n"
        f"c.configure({{c.VARIABLE: {str(folder)!r}}})\n"
        "print(render.compile_all())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    count = int(done.stdout)
    entries = list(folder.iterdir())
    assert count == len(entries) and count >= 20
    assert {p.name.split("-")[0] for p in entries} == {"html", "text"}
    assert len([p for p in entries if p.name.startswith("html-")]) == len(
        list((Path(render.__file__).parent / "templates").glob("*.html.j2"))
    )


def test_the_cache_is_used_by_the_real_path_it_was_checked_at(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    template_cache.configure({template_cache.VARIABLE: str(link)})
    env = _env({"t": "x"})
    template_cache.attach(env, "text")
    assert env.get_template("t").render() == "x"
    # Re-pointing the link afterwards moves nothing: the entries are where the check was.
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    link.unlink()
    link.symlink_to(other)
    again = _env({"u": "y"})
    template_cache.attach(again, "text")
    assert again.get_template("u").render() == "y"
    assert len(list(real.iterdir())) == 2 and list(other.iterdir()) == []


def test_a_folder_that_cannot_be_searched_is_not_trusted_and_crashes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As for a user the image's 0700 folder is not theirs: looking for a .git inside it fails.
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    real_lstat = os.lstat

    def lstat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if str(path).endswith(".git"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(template_cache.os, "lstat", lstat)
    assert template_cache.trusted(folder) is None


def test_an_entry_that_is_a_pipe_is_not_waited_on(cache: Path) -> None:
    env = _env({"t": "{{ a }}"})
    template_cache.attach(env, "text")
    assert env.get_template("t").render(a=1) == "1"
    [entry] = list(cache.iterdir())
    entry.unlink()
    os.mkfifo(entry)
    again = _env({"t": "{{ a }}"})
    template_cache.attach(again, "text")
    assert again.get_template("t").render(a=2) == "2"  # compiled: the pipe is not an entry


def test_doctor_says_where_the_cache_is_or_why_it_is_not_used(tmp_path: Path) -> None:
    from evalgate.setup.doctor import _check_template_cache

    used = _check_template_cache({template_cache.VARIABLE: str(tmp_path / "mine")})
    assert (used.status, used.message) == ("ok", str(tmp_path / "mine"))
    off = _check_template_cache({template_cache.VARIABLE: "off"})
    assert off.status == "ok" and off.message.startswith("off")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    refused = _check_template_cache({template_cache.VARIABLE: str(shared / "templates")})
    assert refused.status == "warn"
    assert f"{shared} above it is another user's or writable by others" in refused.message
    checkout = tmp_path / "repo"
    (checkout / ".git").mkdir(parents=True)
    inside = _check_template_cache({"XDG_CACHE_HOME": str(checkout / ".cache")})
    assert f"inside the git work tree {checkout}" in inside.message
