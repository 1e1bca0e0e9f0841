"""The escaping function, checked against GitHub's own Markdown renderer.

Debian's cmark-gfm (with the autolink, table, strikethrough and tagfilter extensions GitHub
uses) renders each escaped payload of tests/data/escaping-payloads.json, and text that
hypothesis generates from the same dangerous pieces, in the places evalgate puts untrusted
text: a paragraph, a table cell, a list item in an alert, a heading. The rendered HTML must hold
no element but the context's own, and its text must be the payload itself (whitespace folded,
invisible characters shown as <U+XXXX>): nothing linked, nothing mentioned, nothing hidden.

Without cmark-gfm these tests skip, unless EVALGATE_CMARK=required (set by .ci/run once
scripts/cmark-setup succeeded): then they fail.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import unicodedata
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalgate.report.escape import JOINER, escape, fence

PAYLOADS = json.loads(
    (Path(__file__).parents[1] / "data" / "escaping-payloads.json").read_text(encoding="utf-8")
)
REQUIRED = os.environ.get("EVALGATE_CMARK", "").strip().lower() == "required"
CMARK = shutil.which("cmark-gfm")
EXTENSIONS = ("autolink", "table", "strikethrough", "tagfilter")


@pytest.fixture(scope="module")
def cmark() -> str:
    if CMARK is None:
        if REQUIRED:
            pytest.fail("EVALGATE_CMARK=required, but there is no cmark-gfm on PATH")
        pytest.skip("no cmark-gfm on PATH: run scripts/cmark-setup (as root) to install it")
    return CMARK


def render(cmark: str, markdown: str) -> str:
    args = [cmark, "--unsafe"]  # --unsafe: show raw HTML as GitHub's sanitizer would keep it
    for name in EXTENSIONS:
        args += ["-e", name]
    done = subprocess.run(args, input=markdown.encode(), capture_output=True, check=True)
    return done.stdout.decode()


class Elements(HTMLParser):
    """The tags of a rendered fragment, and its text (character references decoded)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text: list[str] = []
        self.comments = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_comment(self, data: str) -> None:
        self.comments += 1

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(fragment: str) -> Elements:
    parser = Elements()
    parser.feed(fragment)
    parser.close()
    return parser


# The expectation, worked out here without the escaper: whitespace folded, every invisible
# character (Unicode categories Cc and Cf, and the blank fillers and variation selectors
# rendered as nothing) written as <U+XXXX>.
_BLANK = {0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0, 0x00AD, 0x034F}


def _invisible(char: str) -> bool:
    code = ord(char)
    if char in "\t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85":
        return char in "\x1c\x1d\x1e\x1f\x85\x0b\x0c"  # \s in Python, but controls all the same
    return (
        unicodedata.category(char) in ("Cc", "Cf")
        or code in _BLANK
        or 0xFE00 <= code <= 0xFE0F
        or 0x180B <= code <= 0x180F
        or 0xE0000 <= code <= 0xE0FFF
    )


def expected_text(text: str) -> str:
    shown = "".join(f"<U+{ord(c):04X}>" if _invisible(c) else c for c in text)
    return re.sub(r"\s+", " ", shown).strip()


def shown_text(rendered: str) -> str:
    """What a reader sees: the text of the fragment, our joiners dropped."""
    parsed = parse(rendered)
    return re.sub(r"\s+", " ", "".join(parsed.text)).strip().replace(JOINER, "")


def assert_inert(rendered: str, allowed: set[str], text: str) -> None:
    parsed = parse(rendered)
    assert set(parsed.tags) <= allowed, (parsed.tags, rendered)
    assert parsed.comments == 0 and "raw HTML omitted" not in rendered, rendered
    seen = "".join(parsed.text)
    # No mention, reference or email a GitHub filter would link (they run on this text).
    assert not re.search(f"@(?!{JOINER})", seen), rendered
    assert not re.search(r"#\d", seen), rendered
    assert not re.search(r"(?i)\bGH-\d", seen), rendered
    # Our joiners are the only invisible characters left.
    assert not any(_invisible(c) for c in seen.replace(JOINER, "")), rendered
    assert shown_text(rendered) == expected_text(text), rendered


def contexts(value: str) -> dict[str, tuple[str, set[str]]]:
    """Where the report templates put escaped text, each with the elements it may produce."""
    return {
        "paragraph": (f"{value}\n", {"p"}),
        "bold": (f"**{value}**\n", {"p", "strong"}),
        "table": (
            f"| id | answer |\n|---|---|\n| c1 | {value} |\n",
            {"table", "thead", "tbody", "tr", "th", "td"},
        ),
        "alert-list": (
            f"> [!NOTE]\n> **x**\n>\n> - {value}\n",
            {"blockquote", "p", "strong", "ul", "li"},
        ),
        "heading": (f"### {value} · run\n", {"h3"}),
        "line-start": (f"{value}, more\n", {"p"}),
    }


def check_markdown(cmark: str, text: str) -> None:
    value = escape(text, "markdown")
    for name, (markdown, allowed) in contexts(value).items():
        rendered = render(cmark, markdown)
        wanted = expected_text(text)
        if name == "table":
            cells = parse(rendered).tags.count("td")
            assert cells == 2, (name, rendered)
            body = rendered.split("<tbody>")[1]
            assert shown_text(body) == ("c1 " + wanted).strip(), (name, rendered)
            assert_inert(body, allowed, "c1 " + text)
            continue
        if name in ("bold", "heading", "line-start", "alert-list"):
            if not wanted:
                continue  # the template's own syntax around nothing (`****` is a rule)
            # Checked for elements only; the surrounding words are the context's own.
            parsed = parse(rendered)
            assert set(parsed.tags) <= allowed, (name, rendered)
            assert "raw HTML omitted" not in rendered and "<a " not in rendered, (name, rendered)
            if name == "bold" and wanted:
                assert parsed.tags.count("strong") == 1, (name, rendered)
            continue
        if not wanted:
            assert rendered.strip() == "", rendered
            continue
        assert_inert(rendered, allowed, text)


def test_every_control_and_format_character_is_shown() -> None:
    # Against the standard library's Unicode data, not the escaper's: each code point of
    # category Cc (but tab, newline and carriage return) or Cf is shown as <U+XXXX>. A list kept
    # by hand missed U+0600-0605, U+06DD, U+070F, U+0890-0891, U+08E2, U+110BD, U+110CD,
    # U+13430-1343F and U+1BCA0-1BCA3; and U+034F, which is default-ignorable.
    from evalgate.report.escape import visible

    wanted = [
        c
        for c in range(0x110000)
        if unicodedata.category(chr(c)) in ("Cc", "Cf") and chr(c) not in "\t\n\r"
    ]
    assert len(wanted) > 150
    missed = [f"U+{c:04X}" for c in wanted if visible(chr(c)) != f"<U+{c:04X}>"]
    assert missed == []
    for c in (0x034F, 0x115F, 0x3164, 0xFE0F, 0xE0041, 0x180B):  # default-ignorable, not Cf
        assert visible(f"a{chr(c)}b") == f"a<U+{c:04X}>b"
    for text in ("plain ascii\tand tabs\n", "naïve café", "日本語", "a\u200dlike"):
        assert visible(text) == "".join(
            f"<U+{ord(ch):04X}>" if unicodedata.category(ch) == "Cf" else ch for ch in text
        )


def test_the_fast_path_skips_no_invisible_character() -> None:
    # visible() leaves text whose non-ASCII characters are of no category an invisible one can
    # have to the ASCII check alone. Two sources of Unicode data meet there: the standard
    # library's categories and the regex module's sets. Every code point the first calls safe
    # must be one the second does not show, and one visible() leaves as it is.
    from evalgate.report.escape import _MAY_HIDE, _invisible, visible

    pattern = _invisible()
    safe = [c for c in range(0x80, 0x110000) if unicodedata.category(chr(c)) not in _MAY_HIDE]
    assert len(safe) > 100_000
    hiding = [f"U+{c:04X}" for c in safe if pattern.fullmatch(chr(c))]
    assert hiding == []
    # One of each kind on the fast path, and beside an invisible one on the other.
    text = "– → × é ½ ★ €"
    assert visible(text) == text
    assert visible(text + "\u202e") == text + "<U+202E>"


@pytest.mark.parametrize("payload", PAYLOADS, ids=[p["id"] for p in PAYLOADS])
def test_payloads_render_as_their_own_text(cmark: str, payload: dict[str, str]) -> None:
    check_markdown(cmark, payload["text"])


def test_the_corpus_covers_the_issue() -> None:
    ids = {p["id"] for p in PAYLOADS}
    for needed in (
        "entity-commat",
        "entity-num",
        "bare-https",
        "bare-www",
        "bidi-override",
        "zero-width",
        "workflow-command",
        "code-fence",
    ):
        assert needed in ids


# Pieces of hostile text, joined in any order with ordinary words.
PIECES = [p["text"] for p in PAYLOADS] + [
    "@",
    "#",
    "&",
    ";",
    ":",
    "/",
    "//",
    ".",
    "www",
    "http",
    "mailto",
    "GH",
    "-",
    "1",
    "42",
    "<",
    ">",
    "|",
    "`",
    "*",
    "_",
    "~",
    "[",
    "]",
    "(",
    ")",
    "!",
    "$",
    "\\",
    "\n",
    " ",
    "=",
    "\u202e",
    "\u200b",
    "\u2066",
    "\ufeff",
    "x",
    "user",
    "example.com",
    "&#64;",
    "&commat;",
]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=8).map("".join))
def test_generated_text_renders_as_itself(text: str) -> None:
    if CMARK is None:
        if REQUIRED:
            pytest.fail("EVALGATE_CMARK=required, but there is no cmark-gfm on PATH")
        pytest.skip("no cmark-gfm on PATH")
    check_markdown(CMARK, text)


@pytest.mark.parametrize("payload", PAYLOADS, ids=[p["id"] for p in PAYLOADS])
def test_code_spans_hold_the_text_literally(cmark: str, payload: dict[str, str]) -> None:
    text = payload["text"]
    rendered = render(cmark, f"prompt {escape(text, 'code')}\n")
    parsed = parse(rendered)
    assert parsed.tags == ["p", "code"], rendered
    inner = rendered.split("<code>", 1)[1].rsplit("</code>", 1)[0]
    assert html.unescape(inner) == (expected_text(text).replace("`", "'") or " "), rendered


@pytest.mark.parametrize("payload", PAYLOADS, ids=[p["id"] for p in PAYLOADS])
def test_a_fenced_block_cannot_be_ended_from_inside(cmark: str, payload: dict[str, str]) -> None:
    text = payload["text"] + "\n````\n" + payload["text"]
    mark = fence(text)
    rendered = render(cmark, f"{mark}sh\n{text}\n{mark}\n\nafter\n")
    parsed = parse(rendered)
    assert parsed.tags == ["pre", "code", "p"], rendered
    assert rendered.endswith("<p>after</p>\n")


@pytest.mark.parametrize("payload", PAYLOADS, ids=[p["id"] for p in PAYLOADS])
def test_html_text_is_inert(payload: dict[str, str]) -> None:
    text = payload["text"]
    parsed = parse(f'<p title="{escape(text, "html")}">{escape(text, "html")}</p>')
    assert parsed.tags == ["p"]
    shown = "".join(parsed.text)
    assert shown == "".join(f"<U+{ord(c):04X}>" if _invisible(c) else c for c in text)


@pytest.mark.parametrize("payload", PAYLOADS, ids=[p["id"] for p in PAYLOADS])
def test_workflow_command_text_cannot_end_the_command(payload: dict[str, str]) -> None:
    """GitHub's runner decodes %25, %0D, %0A (and %3A, %2C in properties): round-trip them."""
    text = payload["text"]
    for target in ("command", "property"):
        value = escape(text, target)  # type: ignore[arg-type]
        assert "\n" not in value and "\r" not in value
        if target == "property":
            assert ":" not in value and "," not in value
        decoded = (
            value.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":").replace("%2C", ",")
        ).replace("%25", "%")
        assert decoded == "".join(f"<U+{ord(c):04X}>" if _invisible(c) else c for c in text)
    line = escape(text, "log")
    assert "\n" not in line and "::" not in line


def test_shell_words_stay_one_word() -> None:
    import shlex

    for payload in PAYLOADS:
        text = payload["text"]
        word = escape(text, "shell")
        assert shlex.split(f"cmd {word}") == ["cmd", expected_text_raw(text)]


def expected_text_raw(text: str) -> str:
    return "".join(f"<U+{ord(c):04X}>" if _invisible(c) else c for c in text)


TEMPLATES = Path(__file__).parents[2] / "evalgate" / "report" / "templates"


def test_no_table_cell_holds_a_code_span_of_untrusted_text() -> None:
    """GitHub splits a table row at each '|' before it reads code spans, so a '|' in a code
    span's text ends the cell and the rest is raw Markdown: a cell shows text through ``md``
    (which escapes the pipe), never through ``code``."""
    rows = [
        (template.name, line)
        for template in sorted(TEMPLATES.glob("*.md.j2"))
        for line in template.read_text(encoding="utf-8").splitlines()
        if line.lstrip().startswith("|") and "|code" in line.replace(" ", "")
    ]
    assert rows == []


def test_a_judge_label_id_cannot_break_out_of_its_table_cell(
    cmark: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`judge check --format markdown` (also in the pull request's comment) shows each
    disagreement's label id in a table cell; the id is the pull request's."""
    from test_judge_check import label_rows, write_project

    from evalgate.cli import main

    hostile = (
        "d08|<img src=https://example.invalid/p.png>[click](https://example.invalid) @octocat|"
    )
    rows = label_rows("dev", 8, 1, 2, 9, "d") + label_rows("holdout", 4, 0, 1, 5, "h")
    for row in rows:
        if row["id"] == "d08":  # a dev label the judge disagrees with
            row["id"] = hostile
    config = write_project(tmp_path, rows=rows)
    monkeypatch.chdir(tmp_path)
    main(["judge", "check", "--config", str(config), "--format", "markdown"])
    lines = capsys.readouterr().out.splitlines()
    [row] = [line for line in lines if "d08" in line]
    header = lines[lines.index(row) - 1]
    while not header.startswith("|--") and not header.startswith("| --"):
        header = lines[lines.index(header) - 1]
    at = lines.index(header)
    table = "\n".join([lines[at - 1], header, row])
    parsed = parse(render(cmark, table))
    assert set(parsed.tags) <= {"table", "thead", "tbody", "tr", "th", "td"}, table
    assert parsed.tags.count("td") == parsed.tags.count("th")  # the row keeps its cells
    assert hostile.replace("@", "@" + JOINER) in "".join(parsed.text)  # the id, as text


def test_an_incomplete_runs_resume_command_is_one_inert_code_span(
    cmark: str, tmp_path: Path
) -> None:
    # The prompt's and the run's names went into backticks raw: a run file from an artefact
    # named its prompt "x` [click here](https://evil.example) @octocat #1 `" and the job summary
    # linked, pinged and cross-referenced.
    from conftest import copy_example

    from evalgate.analysis.summary import summarise
    from evalgate.cli import main
    from evalgate.report.render import render_model
    from evalgate.runs.schema import read_run

    root = copy_example(tmp_path / "shop")
    assert main(["run", "v2", "--limit", "3", "--config", str(root / "evalgate.yml")]) == 0
    [path] = (root / ".evalgate" / "runs").glob("*.json")
    run = read_run(path)
    hostile = "x` [click here](https://evil.example) @octocat #1 `"
    first = run.cases[0]
    unsent = first.outcomes[0].model_copy(
        update={"error": "not sent: the budget", "error_kind": "budget", "score": None}
    )
    run = run.model_copy(
        update={
            "prompt": run.prompt.model_copy(update={"name": hostile}),
            "cases": [first.model_copy(update={"outcomes": [unsent]}), *run.cases[1:]],
        }
    )
    summary = summarise(run)
    assert summary.incomplete and summary.not_run == 1
    markdown = render_model("run", summary, "markdown")
    line = next(x for x in markdown.splitlines() if "Incomplete run" in x)
    rendered = render(cmark, line + "\n")
    parsed = parse(rendered)
    assert "a" not in parsed.tags, rendered
    assert parsed.tags.count("code") == 1, rendered
    # GitHub links no mention or reference inside code; outside it there is none.
    outside = "".join(parse(re.sub(r"<code>.*?</code>", "", rendered)).text)
    assert not re.search("@|#\\d", outside), rendered
    code = re.search(r"<code>(.*?)</code>", rendered)
    assert code is not None
    assert code.group(1).startswith(
        "evalgate run 'x' [click here](https://evil.example) @octocat #1 '' --resume"
    )
