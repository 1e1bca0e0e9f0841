"""Real third-party files (tests/data/third_party/, listed in its MANIFEST.json with package,
version, path, sha256 and license) read as their own tools read them: ``evalgate import`` and
``cases_format:`` give exactly the expected cases or refuse with the expected reason; the expected
cases agree with Inspect's own loader and with OpenAI evals' documented samples format; what does
not map is counted and kept out of scoring."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalgate.cases.importers import convert
from evalgate.cli import main
from evalgate.config.load import load_config
from evalgate.errors import UserError
from evalgate.running.suite import load_suite_cases

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "third_party"
MANIFEST = json.loads((CORPUS / "MANIFEST.json").read_text())
FILES = MANIFEST["files"]
IDS = [e["id"] for e in FILES]


def cases(entries: list[dict[str, Any]]) -> list[Any]:
    """The entries as parameters; one whose expected result evalgate does not give yet (its
    ``known_fault`` says what is wrong and where the fix goes) is a strict expected failure."""
    return [
        pytest.param(
            e,
            id=e["id"],
            marks=[pytest.mark.xfail(strict=True, reason=e["known_fault"])]
            if e.get("known_fault")
            else [],
        )
        for e in entries
    ]


INSPECT = [e for e in FILES if e["format"] == "inspect" and not e.get("inspect_refuses")]
EVALS = [e for e in FILES if e["format"] == "openai-evals"]
OWN = {"MANIFEST.json", "regenerate.py", "LICENSE", "NOTICE"}
FLAGS = {"input": "--input-field", "target": "--target-field", "id": "--id-field"}


def path_of(entry: dict[str, Any]) -> Path:
    return CORPUS / entry["package"] / (entry.get("file") or entry["path"])


def expected_of(entry: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((CORPUS / entry["expected"]).read_text())
    return result


def local(text: str) -> str:
    return text.replace(f"{ROOT}/", "")


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


# ------------------------------------------------------------------------------------------
# The corpus itself
# ------------------------------------------------------------------------------------------


def test_every_corpus_file_is_listed_with_its_sha256_and_license() -> None:
    listed = (
        {path_of(e) for e in FILES}
        | {CORPUS / e["package"] / c["file"] for e in FILES for c in e.get("companions", [])}
        # Result files (tests/foreign/test_results_corpus.py reads them).
        | {CORPUS / e["package"] / e["path"] for e in MANIFEST["results"]}
        | {CORPUS / e["package"] / e["path"] for e in MANIFEST["refused_results"]}
    )
    licences = {CORPUS / p["license_file"] for p in MANIFEST["packages"].values()}
    present = {
        p
        for p in CORPUS.rglob("*")
        if p.is_file()
        and p.name not in OWN
        and p not in licences
        and "expected" not in p.relative_to(CORPUS).parts
    }
    assert present == listed, "a file under tests/data/third_party is not in MANIFEST.json"
    for entry in FILES:
        digest = hashlib.sha256(path_of(entry).read_bytes()).hexdigest()
        assert digest == entry["sha256"], f"{entry['id']}: the file was edited"
        for companion in entry.get("companions", []):
            data = (CORPUS / entry["package"] / companion["file"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == companion["sha256"], companion["file"]
        package = MANIFEST["packages"][entry["package"]]
        assert entry["license"] == package["license"]
        assert (CORPUS / package["license_file"]).is_file()
        assert package["version"] and package["registry"] in ("PyPI", "npm")
        assert entry["derived_from"]
        # A file that is not in the artifact says how it was made (by the tool, or written here).
        assert entry.get("path") or entry.get("made_with") or entry.get("built"), entry["id"]
    assert MANIFEST["blocked"], "what could not be had is said"


# ------------------------------------------------------------------------------------------
# The importer, `evalgate import` and `cases_format:` give exactly the expected result
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("entry", cases(FILES))
def test_the_importer_gives_the_expected_cases_or_refusal(entry: dict[str, Any]) -> None:
    want = expected_of(entry)
    rename = entry.get("fields") or None
    if "refused" in want:
        with pytest.raises(UserError) as caught:
            convert(entry["format"], path_of(entry), rename=rename)
        assert local(str(caught.value)) == want["refused"]
        return
    conversion = convert(entry["format"], path_of(entry), rename=rename)
    assert conversion.plan.config == want["scorer"]
    assert [r for _, r in conversion.records] == want["cases"]
    got_unscored = [
        {"id": u.id, "where": local(u.where), "reason": u.reason} for u in conversion.unscored_list
    ]
    assert got_unscored == want["unscored"]
    # Kept out of scoring: no unscored case has an expected answer.
    assert all(r["expected"] is None for _, r in conversion.unscored)
    assert {n.what: n.count for n in conversion.notes.unmapped.values()} == want["unmapped"]


def import_argv(entry: dict[str, Any], out: Path) -> list[str]:
    argv = ["import", entry["format"], str(path_of(entry)), "--out", str(out)]
    for name, own in (entry.get("fields") or {}).items():
        argv += [FLAGS[name], own]
    return argv


@pytest.mark.parametrize("entry", cases(FILES))
def test_evalgate_import_writes_the_expected_cases_or_refuses(
    entry: dict[str, Any], tmp_path: Path
) -> None:
    want = expected_of(entry)
    out = tmp_path / "cases.jsonl"
    code, said, err = cli(*import_argv(entry, out))
    if "refused" in want:
        assert code == 2 and want["refused"] in local(err)
        assert not out.exists()
        return
    if not want["cases"]:
        # Nothing the scorer can check: refused, with why, and no case file of no cases.
        assert code == 2, err
        assert f"({len(want['unscored'])} read, {len(want['unscored'])} not scored)" in err, err
        assert want["unscored"][0]["reason"] in err and "--scorer" in err
        assert not out.exists() and not (tmp_path / "cases.unscored.jsonl").exists()
        return
    assert code == 0, err
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert written == want["cases"]
    side = tmp_path / "cases.unscored.jsonl"
    unscored = [json.loads(line) for line in side.read_text().splitlines()] if side.exists() else []
    assert [r["id"] for r in unscored] == [u["id"] for u in want["unscored"]]
    for what, count in want["unmapped"].items():
        assert f"{what}: {count}" in said + err


def direct_config(entry: dict[str, Any], work: Path) -> Path:
    """An evalgate.yml whose suite reads a copy of the corpus file (``cases_format:``), at the
    same path inside the repository (a case file outside it is refused)."""
    want = expected_of(entry)
    inside = path_of(entry).relative_to(ROOT)
    (work / inside).parent.mkdir(parents=True)
    shutil.copyfile(path_of(entry), work / inside)
    suite: dict[str, Any] = {
        "prompts": "prompts/*.txt",
        "cases": inside.as_posix(),
        "cases_format": entry["format"],
        "fields": {"input": ["input"]},
        "template": "{{ input }}",
        "model": {"backend": "fake"},
        "scorer": want.get("scorer", {"kind": "contains"}),
        "split": {"holdout_fraction": 0.0},
    }
    if entry.get("fields"):
        suite["cases_format_fields"] = entry["fields"]
    if entry["format"] in ("promptfoo", "langfuse") and "refused" not in want:
        name = convert(entry["format"], path_of(entry)).inputs[0]  # the first var or field
        suite["fields"] = {"input": [name]}
        suite["template"] = "{{ " + name + " }}"
    (work / ".git").mkdir()
    (work / "prompts").mkdir(parents=True)
    (work / "prompts" / "v1.txt").write_text("Answer.\n")
    config = work / "evalgate.yml"
    config.write_text(yaml.safe_dump({"version": 1, "suites": {"main": suite}}))
    return config


@pytest.mark.parametrize("entry", cases(FILES))
def test_cases_format_reads_the_expected_cases_or_refuses(
    entry: dict[str, Any], tmp_path: Path
) -> None:
    want = expected_of(entry)
    loaded = load_config(direct_config(entry, tmp_path))
    suite = loaded.suite(None)[1]
    notes: list[str] = []
    if "refused" in want:
        with pytest.raises(UserError) as caught:
            load_suite_cases(loaded, suite, on_note=notes.append)
        assert str(caught.value).replace(f"{tmp_path}/", "") == want["refused"]
        return
    if not want["cases"]:
        # Nothing left to score: refused as a case file of no cases is, not run as a pass.
        with pytest.raises(UserError) as caught:
            load_suite_cases(loaded, suite, on_note=notes.append)
        message = str(caught.value)
        assert f"none of its {len(want['unscored'])}" in message
        assert want["unscored"][0]["reason"] in message
        return
    cases = load_suite_cases(loaded, suite, on_note=notes.append).cases
    assert [c.id for c in cases] == [r["id"] for r in want["cases"]]
    assert [c.expected for c in cases] == [r["expected"] for r in want["cases"]]
    name = next(iter(suite.fields.input))
    assert [c.input[name] for c in cases] == [r[name] for r in want["cases"]]
    # What was left out is said once, on the run's warning channel.
    assert len(notes) == (1 if want["unscored"] or want["unmapped"] else 0)


# ------------------------------------------------------------------------------------------
# The expected cases agree with the source tools
# ------------------------------------------------------------------------------------------


def inspect_of(entry: dict[str, Any]) -> list[dict[str, Any]]:
    path = CORPUS / "expected" / f"{entry['id']}.inspect.json"
    samples: list[dict[str, Any]] = json.loads(path.read_text())["samples"]
    return samples


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(p["text"] for p in content if p.get("type") == "text")


@pytest.mark.parametrize("entry", INSPECT, ids=[e["id"] for e in INSPECT])
def test_expected_cases_are_inspects_own_samples(entry: dict[str, Any]) -> None:
    want = expected_of(entry)
    samples = inspect_of(entry)
    kept = {u["id"] for u in want["unscored"]}
    cases = {r["id"]: r for r in want["cases"]}
    assert len(cases) + len(kept) == len(samples), "every sample is a case or kept out"
    # Cases follow the file's order; unscored ones are apart.
    order = [r["id"] for r in want["cases"]]
    ids = iter(order)
    for sample in samples:
        if sample["id"] is not None and str(sample["id"]) in kept:
            continue
        given = sample["input"]
        question = given if isinstance(given, str) else text_of(given[-1]["content"])
        if not isinstance(given, str) and any(
            isinstance(m["content"], list) and any(p.get("type") != "text" for p in m["content"])
            for m in given
        ):
            continue  # an image: kept out of scoring, checked by the unscored list
        case = cases[next(ids)]
        if sample["id"] is not None:
            assert case["id"] == str(sample["id"])
        assert case["input"] == question
        # Inspect's match() and includes() compare the target stripped.
        targets = [t.strip() for t in sample["target"]]
        assert case["expected"] == (targets[0] if len(targets) == 1 else targets)


def harness_python() -> str | None:
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        pass
    else:
        return sys.executable
    base = Path(os.environ.get("EVALGATE_HARNESS_DIR", Path.home() / ".cache/evalgate/harness"))
    python = base / "inspect" / "bin" / "python"
    return str(python) if python.is_file() else None


def test_inspects_loader_still_makes_the_stored_samples(tmp_path: Path) -> None:
    python = harness_python()
    if python is None:
        pytest.skip("inspect-ai is not installed (scripts/harness-setup installs it)")
    work = tmp_path / "third_party"
    shutil.copytree(CORPUS, work)
    for stored in (work / "expected").glob("*.inspect.json"):
        stored.unlink()
    subprocess.run(
        [python, str(work / "regenerate.py"), "--inspect"], check=True, timeout=300, cwd=tmp_path
    )
    for entry in INSPECT:
        made = json.loads((work / "expected" / f"{entry['id']}.inspect.json").read_text())
        assert made["samples"] == inspect_of(entry), entry["id"]


@pytest.mark.parametrize("entry", EVALS, ids=[e["id"] for e in EVALS])
def test_expected_cases_follow_openai_evals_samples_format(entry: dict[str, Any]) -> None:
    # evals' samples: "input" is the chat prompt, the last message the one answered (a sample
    # of system messages only is the question as a whole); "ideal" the answer or answers.
    want = expected_of(entry)
    if "refused" in want:
        return
    lines = path_of(entry).read_text(encoding="utf-8").splitlines()
    samples = [json.loads(line) for line in lines if line.strip()]
    assert len(want["cases"]) + len(want["unscored"]) == len(samples)
    scored = [s for s in samples if s.get("ideal") is not None]
    assert len(scored) == len(want["cases"])
    for sample, case in zip(scored, want["cases"], strict=True):
        given = sample["input"]
        if isinstance(given, str):
            question = given
        elif all(m["role"] == "system" and "name" not in m for m in given):
            question = "\n\n".join(m["content"] for m in given)
        else:
            question = given[-1]["content"]
        assert case["input"] == question
        ideal = sample["ideal"]
        if isinstance(ideal, list) and len(ideal) > 1:
            continue  # any of several answers: the scorer's own form, checked above
        answer = ideal[0] if isinstance(ideal, list) else ideal
        assert case["expected"] in (answer, answer.replace(" ", "\\ "))
