"""`evalgate demo`: three prompt versions, then the gate as a pull request meets it, and the
comment it would post; one JSON document with --json; the README quotes its closing lines."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CliResult = tuple[int, str, str]

# What changes from one demo to the next: run names (time and a random tail), clock times,
# durations and latencies. Everything else is deterministic (the fake model, fixed cases).
VARIABLE = [
    (re.compile(r"(bike-shop|support-agent)-(v\d)-\d{8}T\d{6}-[0-9a-f]{4}"), r"\1-\2-TIME-XXXX"),
    (re.compile(r"made \d{4}-\d\d-\d\d \d\d:\d\d UTC"), "made DATE UTC"),
    (re.compile(r"mean \d+ ms · p95 \d+ ms"), "mean N ms · p95 N ms"),
    (re.compile(r"wall \d+\.\d+ s"), "wall N s"),
    (re.compile(r"^(duration +)\d+\.\d s$", re.MULTILINE), r"\1N s"),
]


def stable(text: str) -> str:
    for pattern, replacement in VARIABLE:
        text = pattern.sub(replacement, text)
    return text


@pytest.fixture(scope="module")
def demo_text() -> CliResult:
    # One in-process demo for the module (it makes four runs of 143 cases).
    import io

    from evalgate.cli import main

    with pytest.MonkeyPatch.context() as m:
        m.setenv("NO_COLOR", "1")
        m.delenv("CI", raising=False)
        out, err = io.StringIO(), io.StringIO()
        code = main(["demo", "--show", "3"], out, err)
    return code, out.getvalue(), err.getvalue()


def test_the_demo_output_is_its_golden_file(
    demo_text: CliResult, golden: Callable[..., None]
) -> None:
    code, out, _ = demo_text
    assert code == 0
    golden("demo.txt", stable(out))


def test_the_demo_tells_the_story_in_order(demo_text: CliResult) -> None:
    _, out, _ = demo_text
    steps = [
        "1. Three prompt versions (v1, v2, v3) over the same cases",
        "2. The gate, as a pull request meets it: the default branch ships v2",
        "Verdict: PASS",
        "3. The comment the action would post on the pull request",
        "│ bike-shop passed: not worse",
        "4. An agent suite, gated on the tools it calls",
        "5. A judge, checked against people's labels before it may gate",
        "Judge check of suite bike-shop-judged · judge fake/fake-judge",
        "met, the judge may gate",
        "Why v3 ties v2 here: the fake model",
        "In short",
    ]
    at = [out.find(step) for step in steps]
    assert all(i >= 0 for i in at), [s for s, i in zip(steps, at, strict=True) if i < 0]
    assert at == sorted(at)
    # The baseline has the suite's gate.baseline_repeats (2) repeats, so the noise is measured.
    assert "Noise     flip rate 0.0% over 2 baseline repeats" in out
    # The comment is rendered for a terminal: no HTML, no Markdown escapes, no marker.
    comment = out[out.find("3. The comment") : out.find("Why v3 ties")]
    for markup in ("<details>", "<summary>", "<!--", "<sub>", "\\(", "**", "|---"):
        assert markup not in comment, markup


def test_demo_in_markdown_renders_every_section(cli: Callable[..., CliResult]) -> None:
    # It ended in a jinja2 traceback: the gate has no gate.md.j2 (its Markdown form is the
    # job summary's, as for `evalgate gate --format markdown`).
    code, out, err = cli("demo", "--format", "markdown")
    assert code == 0, err
    assert "Traceback" not in err
    assert "### bike-shop · prompt `v3`" in out
    assert "<!-- evalgate:suite=bike-shop -->" in out  # the comment, as GitHub receives it
    assert "### support-agent · prompt `v2`" in out
    assert "**bike-shop passed" in out  # the gate's job-summary form


def test_demo_json_is_one_document_and_banners_go_to_stderr(
    cli: Callable[..., CliResult],
) -> None:
    code, out, err = cli("demo", "--json")
    assert code == 0
    document = json.loads(out)  # the whole of stdout: one JSON document
    assert list(document["runs"]) == ["v1", "v2", "v3"]
    assert [(c["a_prompt"], c["b_prompt"]) for c in document["comparisons"]] == [
        ("v1", "v2"),
        ("v2", "v3"),
    ]
    gate = document["gate"]
    assert (gate["baseline"]["version"], gate["baseline"]["repeats"]) == ("v2", 2)
    assert gate["candidate"]["version"] == "v3"
    assert gate["verdict"]["kind"] == "pass"
    assert gate["verdict"]["reasons"]
    assert document["comment"].startswith("<!-- evalgate:suite=bike-shop -->")
    assert "evalgate" in err and "demo" in err and "In short" in err
    # Every section of the text demo is in the document: the agent suite and the judge check.
    agent = document["agent"]
    assert agent["suite"] == "support-agent" and agent["tools"] == 6
    assert agent["baseline"]["version"] == "v1" and agent["candidate"]["prompt"] == "v2"
    assert agent["verdict"]["kind"] in ("pass", "fail", "inconclusive")
    judge = document["judge"]
    assert judge["suite"] == "bike-shop-judged"
    assert judge["floor"]["ok"] is True
    assert "support-agent example" in err and "judged suite" in err


def test_the_readme_first_screen_shows_the_demo_verdict(demo_text: CliResult) -> None:
    _, out, _ = demo_text
    recap = out[out.index("In short") :].split("\n\n")[0].strip("\n")
    assert "PASS" in recap
    first_screen = "\n".join((ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:45])
    assert "evalgate demo" in first_screen
    assert recap in first_screen, "the README's first screen must quote the demo's closing lines"
