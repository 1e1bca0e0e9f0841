"""The local HTML report (`evalgate report RUN --html`, `evalgate compare A B --html`).

Unit tests read the page with the standard library's HTML parser: its structure, its counts
against the comparison, the escaping of hostile text, and that it fetches nothing. The tests
marked `browser` open it in Debian's headless Chromium, driven over the DevTools protocol on a
pipe (no port, no network): the search box and the filters, from the URL fragment, typed and
clicked; no console error and no Content-Security-Policy violation; and a screenshot.

Without Chromium the browser tests are skipped, unless EVALGATE_BROWSER=required (set by .ci/run
once scripts/browser-setup succeeded): then they fail. Like a golden file, the README's
screenshot docs/html-report.png is rewritten by scripts/regen-golden (EVALGATE_REGEN_GOLDEN=1).
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import io
import json
import os
import queue
import re
import shutil
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from conftest import CREATED, REGEN_GOLDEN, ROOT, copy_example

from evalgate.analysis.compare import Comparison, compare_runs
from evalgate.analysis.summary import Confusion, summarise
from evalgate.cases.holdout import HoldoutKey, redact
from evalgate.cli import main
from evalgate.report.html import COMPARE_KINDS, heat_map, render_compare_html, render_run_html
from evalgate.report.render import pvalue
from evalgate.runs.schema import CaseResult, Run, find_run

CaseFactory = Callable[..., CaseResult]
RunFactory = Callable[..., Run]

SCRIPT_TAG = "<script>alert(1)</script>"
IMG_TAG = '"><img src=x onerror=alert(2)>'
HOSTILE = f"{SCRIPT_TAG} {IMG_TAG} </textarea></pre>' onmouseover='alert(3)"
SCREENSHOT = ROOT / "docs" / "html-report.png"


# ------------------------------------------------------------------------------------------
# Reading a page
# ------------------------------------------------------------------------------------------


@dataclass
class Row:
    kind: str
    id: str
    category: str
    text: str = ""


class Page(HTMLParser):
    """What the tests look at in a page: every tag with its attributes, the case rows with
    their text, the scripts' text and the style sheet."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.rows: list[Row] = []
        self.scripts: list[str] = []
        self.styles: list[str] = []
        self.text: list[str] = []
        self._in: str | None = None
        self._row: Row | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        self.tags.append((tag, values))
        if tag in ("script", "style"):
            self._in = tag
            (self.scripts if tag == "script" else self.styles).append("")
        if tag == "tr" and "data-kind" in values:
            self._row = Row(
                str(values["data-kind"]), str(values["data-id"]), str(values["data-category"])
            )
            self.rows.append(self._row)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._in = None
        if tag == "tr":
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._in == "script":
            self.scripts[-1] += data
        elif self._in == "style":
            self.styles[-1] += data
        else:
            self.text.append(data)
            if self._row is not None:
                self._row.text += data

    def kinds(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in self.rows:
            counts[row.kind] = counts.get(row.kind, 0) + 1
        return counts

    def all_text(self) -> str:
        return " ".join(" ".join(self.text).split())


def settle(run: Run, name: str) -> Run:
    """A real run with its volatile fields fixed: name, time, wall clock, commit."""
    return run.model_copy(
        update={
            "name": name,
            "created_at": CREATED,
            "wall_s": 0.25,
            "git_commit": None,
            "git_ref": None,
        }
    )


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    page.close()
    return page


# ------------------------------------------------------------------------------------------
# Runs that exercise every part of the page
# ------------------------------------------------------------------------------------------


@dataclass
class Pair:
    a: Run
    b: Run
    comparison: Comparison
    html: str
    holdout_id: str


@pytest.fixture
def pair(make_case: CaseFactory, make_run: RunFactory) -> Pair:
    """v1 -> v2 with every kind of row, a hostile message and reply, and a holdout case."""
    secret = "holdout text: brake cable price"
    held_a = redact(make_case("hold-1", "quote", "quote", message=secret), HoldoutKey())
    held_b = redact(make_case("hold-1", "quote", "booking", message=secret), HoldoutKey())
    a = make_run(
        [
            make_case("f1", "quote", "booking", message="What do new brake pads cost?"),
            make_case("f2", "booking", "quote"),
            make_case("b1", "booking", "booking", message="Book my brake service on Tuesday"),
            make_case("b2", "status", "status", message=HOSTILE),
            make_case("w1", "parts", "quote", message="Do you stock brake cables?"),
            make_case("r1", "parts", "parts"),
            make_case("r2", "other", "other"),
            make_case("e1", "quote", "quote"),
            make_case("ed1", "quote", "quote", message="Old wording"),
            make_case("oa1", "other", "other", message="Only in the old run"),
            held_a,
        ],
        prompt={"name": "v1"},
    )
    b = make_run(
        [
            make_case("f1", "quote", "quote", message="What do new brake pads cost?"),
            make_case("f2", "booking", "booking"),
            make_case("b1", "booking", "other", message="Book my brake service on Tuesday"),
            make_case(
                "b2",
                "status",
                "complaint",
                message=HOSTILE,
                outcome={"text": f"My answer: {HOSTILE}"},
            ),
            make_case("w1", "parts", "other", message="Do you stock brake cables?"),
            make_case("r1", "parts", "parts"),
            make_case("r2", "other", "other"),
            make_case("e1", "quote", error="HTTP 529 overloaded", error_kind="overloaded"),
            make_case("ed1", "quote", "quote", message="New wording"),
            make_case("ob1", "booking", "booking", message="Only in the new run"),
            held_b,
        ],
        prompt={"name": "v2"},
    )
    comparison = compare_runs(a, b)
    return Pair(a, b, comparison, render_compare_html(a, b, comparison), held_a.id)


# ------------------------------------------------------------------------------------------
# The page, read as HTML
# ------------------------------------------------------------------------------------------


def test_rows_match_the_comparison_and_leave_out_the_holdout(pair: Pair) -> None:
    c = pair.comparison
    assert pair.holdout_id in {r.id for r in c.broken}, "the holdout case should be a broken pair"
    page = parse(pair.html)
    listed = {
        "broken": len(c.broken) - 1,  # the holdout case
        "fixed": len(c.fixed),
        "both-wrong": len(c.both_wrong),
        "errored": len(c.errored),
        "only-a": len(c.only_a),
        "only-b": len(c.only_b),
        "edited": len(c.edited),
    }
    assert page.kinds() == listed
    assert listed == {
        "broken": 2,
        "fixed": 2,
        "both-wrong": 1,
        "errored": 1,
        "only-a": 1,
        "only-b": 1,
        "edited": 1,
    }
    # Broken first, as the text report lists them.
    assert [r.kind for r in page.rows] == sorted(
        (r.kind for r in page.rows), key=list(COMPARE_KINDS).index
    )
    # A filter button per kind, with the number of rows it shows.
    buttons = {
        v.get("data-value"): v for t, v in page.tags if t == "button" and v["data-filter"] == "kind"
    }
    assert set(buttons) == {None, *listed}
    text = page.all_text()
    for kind, n in listed.items():
        assert f"{COMPARE_KINDS[kind]} {n}" in text
    assert f"right in both {c.both_right}" in text
    assert f"p = {pvalue(c.p_value)}" in text
    [edited] = [r for r in page.rows if r.kind == "edited"]
    assert "A: Old wording" in edited.text and "B: New wording" in edited.text
    # The holdout case is counted, never named or quoted.
    assert pair.holdout_id not in pair.html
    assert "holdout text" not in pair.html
    assert "1 holdout case is counted in the numbers above but never listed" in text


def test_both_replies_are_shown_in_full_side_by_side(
    make_case: CaseFactory, make_run: RunFactory
) -> None:
    long_reply = "Let me think. " * 200 + '{"category": "quote"}'
    a = make_run([make_case("c1", "quote", ["booking", "booking"])], prompt={"name": "v1"})
    b = make_run(
        [make_case("c1", "quote", ["quote", "booking"], outcome={"text": long_reply})],
        prompt={"name": "v2"},
    )
    c = compare_runs(a, b)
    assert [r.id for r in c.fixed] == ["c1"]  # a score of 0.5 passes
    page = parse(render_compare_html(a, b, c))
    [row] = page.rows
    assert row.text.count(long_reply) == 2, "each repeat's reply, whole"
    assert row.text.count('{"category": "booking"}') == 2  # A's two replies
    assert "repeat 1: ✓ quote" in row.text
    assert "repeat 2: ✗ booking" in row.text
    assert "✗ booking" in row.text
    assert "✓ quote" in row.text


def test_hostile_text_is_escaped_everywhere(make_case: CaseFactory, make_run: RunFactory) -> None:
    case = make_case(
        "x1",
        HOSTILE,
        "booking",
        message=HOSTILE,
        category=HOSTILE,
        outcome={"text": HOSTILE},
    )
    run = make_run([case], name=f"run {HOSTILE}", suite=HOSTILE, prompt={"name": HOSTILE})
    other = make_run([make_case("x1", HOSTILE, HOSTILE, message=HOSTILE, category=HOSTILE)])
    pages = [
        render_run_html(run, summarise(run)),
        render_compare_html(other, run, compare_runs(other, run)),
    ]
    for html in pages:
        assert SCRIPT_TAG not in html
        assert "<img" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert "&#34;&gt;&lt;img src=x onerror=alert(2)&gt;" in html
        page = parse(html)
        assert [t for t, _ in page.tags].count("script") == 1
        assert not [t for t, _ in page.tags if t in ("img", "textarea", "iframe", "object")]
        handlers = [(t, k) for t, attrs in page.tags for k in attrs if k.startswith("on")]
        assert handlers == []
        # The hostile text is there, as text: in the cases, the header and the heat map.
        assert page.all_text().count(SCRIPT_TAG) >= 3


def test_the_page_fetches_nothing(pair: Pair) -> None:
    html = pair.html
    page = parse(html)
    assert not re.search(r"https?://", html), "no URL at all in a page made of URL-free runs"
    assert not [t for t, _ in page.tags if t in ("link", "img", "iframe", "object", "embed")]
    assert not [(t, a) for t, a in page.tags if {"src", "href", "srcset", "action"} & set(a)]
    assert "@import" not in "".join(page.styles)
    assert "url(" not in "".join(page.styles) + html
    # The policy forbids every fetch and every script but the page's own.
    [policy] = [
        str(a["content"])
        for t, a in page.tags
        if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"
    ]
    assert "default-src 'none'" in policy
    [script] = page.scripts
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}';" in policy


def test_run_page_has_the_numbers_categories_and_heat_map(
    make_case: CaseFactory, make_run: RunFactory
) -> None:
    cases = [make_case(f"b{i}", "booking", "booking") for i in range(6)]
    cases += [make_case("b6", "booking", "quote"), make_case("q1", "quote", "quote")]
    cases += [make_case("q2", "quote", error="timed out", error_kind="timeout")]
    cases += [redact(make_case("h1", "quote", "quote", message="holdout question"), HoldoutKey())]
    run = make_run(cases)
    s = summarise(run)
    html = render_run_html(run, s)
    page = parse(html)
    text = page.all_text()
    assert "fake backend is a deterministic offline stand-in" in text
    assert f"sha {s.prompt_sha}" in text
    # The holdout case is counted apart (release reports score it), never listed.
    assert "7/8 scored, 95% CI" in text
    assert s.holdout_n == 1
    assert page.kinds() == {"right": 7, "wrong": 1, "errored": 1}
    assert [r.kind for r in page.rows][-1] == "right", "wrong and errored first"
    assert "holdout question" not in html
    tables = [a.get("class") for t, a in page.tags if t == "table"]
    assert tables == ["categories", "heat", "cases"]
    assert all(f"{row.category} {row.accuracy.n} " in text for row in s.categories)
    cells = [a for t, a in page.tags if t == "td" and "cell" in str(a.get("class"))]
    assert s.confusion is not None
    assert len(cells) == len(s.confusion.expected) * len(s.confusion.answers)
    diagonal = [a for a in cells if "diagonal" in str(a["class"])]
    assert len(diagonal) == len(set(s.confusion.expected) & set(s.confusion.answers))


def test_heat_map_shades_by_count_with_a_marked_diagonal() -> None:
    confusion = Confusion(
        expected=["a", "b"], answers=["a", "b", "(none)"], counts=[[8, 2, 0], [1, 4, 1]]
    )
    heat = heat_map(confusion)
    assert heat is not None
    alphas = {(r.expected, c.answer): c.alpha for r in heat.rows for c in r.cells}
    assert alphas[("a", "a")] == 1.0
    assert alphas[("a", "(none)")] == 0.0
    assert 0 < alphas[("b", "a")] < alphas[("a", "b")] < alphas[("b", "b")] < 1
    assert [[c.diagonal for c in r.cells] for r in heat.rows] == [
        [True, False, False],
        [False, True, False],
    ]
    assert [r.total for r in heat.rows] == [10, 6]
    assert heat_map(None) is None


# ------------------------------------------------------------------------------------------
# The CLI, on runs of the bike-shop example made with the fake backend
# ------------------------------------------------------------------------------------------


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def bike_shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of examples/bike-shop with saved runs of v1 and v2 (`evalgate run`, fake backend)
    and their comparison as HTML (`evalgate compare --html`) in compare.html."""
    root = copy_example(tmp_path_factory.mktemp("html") / "bike-shop")
    config = str(root / "evalgate.yml")
    with pytest.MonkeyPatch.context() as env:
        env.delenv("CI", raising=False)
        for version in ("v1", "v2"):
            code, _, err = cli("run", version, "--config", config)
            assert code == 0, err
    target = root / "compare.html"
    code, out, err = cli(
        "compare", "latest:v1", "latest:v2", "--config", config, "--html", str(target)
    )
    assert (code, err) == (0, "")
    assert out == f"{target.resolve()}\n", "only the path is printed"
    return root


def test_cli_writes_the_html_and_prints_only_its_path(
    bike_shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = parse((bike_shop / "compare.html").read_text(encoding="utf-8"))
    assert sum(page.kinds().values()) == 143  # v1 gets every case wrong: fixed or wrong in both
    assert "bike-shop: v1 → v2" in page.all_text()

    monkeypatch.chdir(bike_shop)
    code, out, err = cli("report", "latest:v2", "--html", "run.html")
    assert (code, err) == (0, "")
    assert out == f"{bike_shop.resolve() / 'run.html'}\n"
    run_page = parse((bike_shop / "run.html").read_text(encoding="utf-8"))
    assert "bike-shop: v2" in run_page.all_text()
    assert sum(run_page.kinds().values()) == 143


def test_cli_html_to_a_missing_folder_is_a_user_error(bike_shop: Path) -> None:
    target = bike_shop / "no-such-folder" / "report.html"
    code, out, err = cli(
        "report", "latest:v2", "--config", str(bike_shop / "evalgate.yml"), "--html", str(target)
    )
    assert code == 2
    assert out == ""
    [line] = err.splitlines()
    assert line.startswith(f"error: {target}: cannot write the HTML report")


# ------------------------------------------------------------------------------------------
# A real browser: Chromium over the DevTools protocol
# ------------------------------------------------------------------------------------------

REQUIRED = os.environ.get("EVALGATE_BROWSER", "").strip().lower() == "required"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Headless, and quiet: no sync, updates, background fetches or first-run pages.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
]
WIDTH, HEIGHT = 1280, 1600
TIMEOUT = 30.0


class BrowserError(AssertionError):
    pass


def _above_9(fd: int) -> int:
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return moved


class Browser:
    """Headless Chromium, driven over the DevTools protocol on the pipe Chromium reads from fd
    3 and writes to fd 4 (NUL-separated JSON messages): no port is opened."""

    def __init__(self, binary: str, folder: Path) -> None:
        self.log = folder / "chromium.log"
        into_r, self._into = os.pipe()
        self._out, out_w = os.pipe()
        # Chromium's ends, above 9 (so that putting one on fd 3 cannot overwrite the other).
        into_r, out_w = (_above_9(fd) for fd in (into_r, out_w))
        # bash puts the pipes on fds 3 and 4, where Chromium expects them.
        shell = f'exec "$0" "$@" 3<&{into_r} 4>&{out_w}'
        profile = f"--user-data-dir={folder / 'profile'}"
        with self.log.open("wb") as log:
            self._process = subprocess.Popen(
                ["bash", "-c", shell, binary, *FLAGS, profile, "about:blank"],
                pass_fds=(into_r, out_w),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        os.close(into_r)
        os.close(out_w)
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.events: list[dict[str, Any]] = []
        self._id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buffer = b""
        try:
            while chunk := os.read(self._out, 1 << 16):
                buffer += chunk
                *messages, buffer = buffer.split(b"\0")
                for message in messages:
                    self._inbox.put(json.loads(message))
        finally:
            os.close(self._out)
            self._inbox.put(None)

    def _next(self, deadline: float) -> dict[str, Any]:
        try:
            message = self._inbox.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise BrowserError(f"Chromium did not answer in {TIMEOUT:.0f} s") from None
        if message is None:
            raise self._gone()
        return message

    def _gone(self) -> BrowserError:
        tail = self.log.read_text(errors="replace")[-2000:]
        return BrowserError(f"Chromium closed the pipe; its log ends:\n{tail}")

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._id += 1
        message: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        try:
            os.write(self._into, json.dumps(message).encode() + b"\0")
        except BrokenPipeError:
            raise self._gone() from None
        deadline = time.monotonic() + TIMEOUT
        while True:
            reply = self._next(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply["result"]
                return result
            self.events.append(reply)

    def wait_for(self, method: str, session: str) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT
        for event in self.events:
            if event.get("method") == method and event.get("sessionId") == session:
                self.events.remove(event)
                return event
        while True:
            event = self._next(deadline)
            if event.get("method") == method and event.get("sessionId") == session:
                return event
            self.events.append(event)

    def open(self, url: str) -> Tab:
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session)
        self.send(
            "Emulation.setDeviceMetricsOverride",
            session,
            width=WIDTH,
            height=HEIGHT,
            deviceScaleFactor=1,
            mobile=False,
        )
        self.send("Page.navigate", session, url=url)
        self.wait_for("Page.loadEventFired", session)
        return Tab(self, target, session)

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except BrowserError:
            pass
        finally:
            os.close(self._into)
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()


# What the tests read from a page: the rows as shown, the controls, what ran and what loaded.
STATE = """JSON.stringify({
  ready: document.documentElement.getAttribute("data-ready"),
  fragment: location.hash,
  search: document.getElementById("search").value,
  shown: document.getElementById("shown").textContent,
  pressed: Array.from(document.querySelectorAll("button[aria-pressed=true]"))
    .map(b => [b.dataset.filter, b.dataset.value === undefined ? null : b.dataset.value]),
  rows: Array.from(document.querySelectorAll("#cases tbody tr[data-kind]")).map(r => ({
    id: r.dataset.id, kind: r.dataset.kind, category: r.dataset.category,
    visible: r.offsetParent !== null, text: r.textContent.toLowerCase()})),
  images: document.images.length,
  scripts: document.scripts.length
})"""


@dataclass
class Tab:
    browser: Browser
    target: str
    session: str

    def evaluate(self, expression: str, *, wait: bool = False) -> Any:
        """The expression's value (awaited when ``wait`` and it is a promise)."""
        result = self.browser.send(
            "Runtime.evaluate",
            self.session,
            expression=expression,
            returnByValue=True,
            awaitPromise=wait,
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def state(self) -> dict[str, Any]:
        state: dict[str, Any] = json.loads(self.evaluate(STATE))
        return state

    def visible(self) -> set[str]:
        return {r["id"] for r in self.state()["rows"] if r["visible"]}

    def problems(self) -> list[str]:
        """Console messages, uncaught exceptions and policy violations of this page."""
        self.evaluate("0")  # a round trip, so that every earlier event has arrived
        found = []
        for event in self.browser.events:
            if event.get("sessionId") != self.session:
                continue
            params = event.get("params", {})
            if event.get("method") == "Runtime.consoleAPICalled":
                found.append(f"console.{params['type']}: {params['args']}")
            elif event.get("method") == "Runtime.exceptionThrown":
                found.append(f"uncaught: {params['exceptionDetails']}")
            elif event.get("method") == "Log.entryAdded":
                entry = params["entry"]
                found.append(f"{entry['level']} ({entry['source']}): {entry['text']}")
        return found

    def screenshot(self) -> bytes:
        data = self.browser.send("Page.captureScreenshot", self.session, format="png")["data"]
        return base64.b64decode(data)

    def close(self) -> None:
        self.browser.send("Target.closeTarget", targetId=self.target)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    if CHROMIUM is None:
        if REQUIRED:
            pytest.fail("EVALGATE_BROWSER=required, but there is no chromium on PATH")
        pytest.skip("no chromium on PATH: run scripts/browser-setup (as root) to install it")
    chromium = Browser(CHROMIUM, tmp_path_factory.mktemp("chromium"))
    try:
        yield chromium
    finally:
        chromium.close()


@pytest.fixture
def open_page(browser: Browser, tmp_path: Path) -> Iterator[Callable[[str, str], Tab]]:
    """Open an HTML page (text) with a URL fragment; each tab is checked for problems."""
    tabs: list[Tab] = []

    def load(html: str, fragment: str = "") -> Tab:
        path = tmp_path / f"page-{len(tabs)}.html"
        path.write_text(html, encoding="utf-8")
        tab = browser.open(path.as_uri() + fragment)
        tabs.append(tab)
        assert tab.evaluate("document.documentElement.getAttribute('data-ready')") == "1", (
            "the page's script did not run"
        )
        return tab

    yield load
    for tab in tabs:
        tab.close()


def _matching(state: dict[str, Any], words: list[str]) -> set[str]:
    return {r["id"] for r in state["rows"] if all(w in r["text"] for w in words)}


@pytest.mark.browser
def test_search_fragment_shows_only_matching_rows(
    bike_shop: Path, open_page: Callable[[str, str], Tab]
) -> None:
    tab = open_page((bike_shop / "compare.html").read_text(encoding="utf-8"), "#q=brake")
    state = tab.state()
    assert tab.problems() == []
    visible = {r["id"] for r in state["rows"] if r["visible"]}
    assert visible == _matching(state, ["brake"])
    assert 0 < len(visible) < len(state["rows"])
    assert all("brake" in r["text"] for r in state["rows"] if r["visible"])
    assert state["search"] == "brake"
    assert state["shown"] == str(len(visible))


@pytest.mark.browser
@pytest.mark.parametrize(
    ("fragment", "expected"),
    [
        ("#kind=broken", {"b1", "b2"}),
        ("#kind=fixed&q=brake", {"f1"}),
        ("#q=BRAKE%20tuesday", {"b1"}),  # every word, in any case
        ("#cat=quote", {"f1", "e1", "ed1"}),
        ("#kind=nonsense&cat=quote&q=", {"f1", "e1", "ed1"}),  # an unknown value: no filter
    ],
)
def test_fragment_filters(
    pair: Pair, open_page: Callable[[str, str], Tab], fragment: str, expected: set[str] | None
) -> None:
    tab = open_page(pair.html, fragment)
    state = tab.state()
    everything = {r["id"] for r in state["rows"]}
    assert tab.visible() == (everything if expected is None else expected)
    assert state["shown"] == str(len(tab.visible()))
    assert tab.problems() == []


@pytest.mark.browser
def test_typing_and_clicking_filter_the_rows(
    pair: Pair, open_page: Callable[[str, str], Tab]
) -> None:
    tab = open_page(pair.html, "")
    assert len(tab.visible()) == sum(parse(pair.html).kinds().values()) == 9
    tab.evaluate("document.getElementById('search').focus()")
    tab.browser.send("Input.insertText", tab.session, text="brake")
    assert tab.visible() == {"f1", "b1", "w1"}
    tab.evaluate("document.querySelector('button[data-filter=kind][data-value=broken]').click()")
    state = tab.state()
    assert tab.visible() == {"b1"}
    assert ["kind", "broken"] in state["pressed"]
    assert state["fragment"] == "#q=brake&kind=broken", "the view can be bookmarked"
    tab.evaluate("document.querySelector('button[data-filter=kind]:not([data-value])').click()")
    assert tab.visible() == {"f1", "b1", "w1"}
    # A changed fragment is read again (the page's listener runs before this one).
    tab.evaluate(
        "new Promise(done => { addEventListener('hashchange', () => setTimeout(done), "
        "{once: true}); location.hash = '#cat=booking'; })",
        wait=True,
    )
    assert tab.visible() == {"f2", "b1", "ob1"}
    assert tab.state()["search"] == ""
    assert tab.problems() == []


@pytest.mark.browser
def test_hostile_text_stays_text_in_the_browser(
    pair: Pair, open_page: Callable[[str, str], Tab]
) -> None:
    tab = open_page(pair.html, "#q=onerror")
    state = tab.state()
    assert state["images"] == 0
    assert state["scripts"] == 1
    assert tab.visible() == {"b2"}
    [row] = [r for r in state["rows"] if r["id"] == "b2"]
    assert row["text"].count(SCRIPT_TAG.lower()) >= 2  # the message and B's reply, as text
    assert tab.problems() == [], "no console message, exception or policy violation"


@pytest.mark.browser
def test_screenshot_of_the_bike_shop_comparison(
    bike_shop: Path, open_page: Callable[[str, str], Tab], tmp_path: Path
) -> None:
    # The runs the CLI made, with their names, times and wall clocks fixed: the same code and
    # browser draw the same picture, so regenerating it changes docs/ only when the page did.
    state = bike_shop / ".evalgate"
    a, b = (
        settle(find_run(f"latest:{v}", state), f"bike-shop-{v}-20250601T120000-0{v}")
        for v in ("v1", "v2")
    )
    html = render_compare_html(a, b, compare_runs(a, b), price_as="claude-haiku-4-5")
    tab = open_page(html, "")
    png = tab.screenshot()
    assert tab.problems() == []
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (WIDTH, HEIGHT)
    assert len(png) > 50_000, "a page of text and colour, not a blank one"
    if os.environ.get(REGEN_GOLDEN):
        SCREENSHOT.write_bytes(png)
    else:
        (tmp_path / "html-report.png").write_bytes(png)
