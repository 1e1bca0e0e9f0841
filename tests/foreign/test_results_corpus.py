"""Result files that no one here wrote (tests/data/third_party/MANIFEST.json, ``results``), read
as their own tool counts them, and a pair of them gated as the files themselves say it should
go. The expected numbers are promptfoo's own ``stats`` in each file and counts made by hand from
the files (the manifest says how); the checks below count the raw JSON again, with nothing of
evalgate's, and compare."""

from __future__ import annotations

import hashlib
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from evalgate.foreign import read_foreign

CORPUS = Path(__file__).resolve().parents[1] / "data" / "third_party"
MANIFEST = json.loads((CORPUS / "MANIFEST.json").read_text(encoding="utf-8"))
RESULTS = {e["id"]: e for e in MANIFEST["results"]}


def path_of(entry: dict[str, Any]) -> Path:
    return CORPUS / entry["package"] / entry["path"]


def raw_results(entry: dict[str, Any]) -> list[dict[str, Any]]:
    data = json.loads(path_of(entry).read_text(encoding="utf-8"))
    results: list[dict[str, Any]] = data["results"]["results"]
    return results


@pytest.mark.parametrize("entry", MANIFEST["results"], ids=list(RESULTS))
def test_the_file_is_the_released_one(entry: dict[str, Any]) -> None:
    assert hashlib.sha256(path_of(entry).read_bytes()).hexdigest() == entry["sha256"]
    package = MANIFEST["packages"][entry["package"]]
    assert entry["license"] == package["license"]
    assert (CORPUS / package["license_file"]).is_file()


@pytest.mark.parametrize("entry", MANIFEST["results"], ids=list(RESULTS))
def test_evalgate_counts_what_promptfoo_counted(entry: dict[str, Any]) -> None:
    expected = entry["expected"]
    stats = json.loads(path_of(entry).read_text(encoding="utf-8"))["results"]["stats"]
    # The manifest's numbers are the file's own (promptfoo's stats block).
    assert {k: stats[k] for k in ("successes", "failures", "errors")} == {
        k: expected[k] for k in ("successes", "failures", "errors")
    }
    foreign = read_foreign(path_of(entry))
    run = foreign.run()
    outcomes = [o for c in run.cases for o in c.outcomes]
    assert len(outcomes) == expected["results"]
    assert sum(o.error is None and o.score == 1.0 for o in outcomes) == expected["successes"]
    assert sum(o.error is None and o.score == 0.0 for o in outcomes) == expected["failures"]
    # A timed-out request is an error, never a wrong answer.
    assert sum(o.error is not None for o in outcomes) == expected["errors"]
    # Tests that look alike are tests of their own, not repeats of one: the file has no
    # __repeatIndex, so each result is one test.
    assert len(run.cases) == expected["cases"] and run.repeats == 1
    assert foreign.notes == [
        f"{expected['alike']} tests share their vars and description with another test of the "
        "file: they are paired by their order among those (give each a description to pair "
        "them by name)"
    ]
    # The failed cases are the results the manifest names, by their query (counted raw).
    raw = raw_results(entry)
    failed_raw = Counter(
        json.dumps((r.get("testCase") or {}).get("vars"), sort_keys=True)
        for r in raw
        if r["testIdx"] in expected["failed_testIdx"]
    )
    failed_read = Counter(
        json.dumps(c.input, sort_keys=True)
        for c in run.cases
        if c.outcomes[0].error is None and c.outcomes[0].score == 0.0
    )
    assert failed_read == failed_raw
    errored = [r for r in raw if r.get("failureReason") == 2]
    assert sorted(r["testIdx"] for r in errored) == expected.get("errored_testIdx", [])


def test_the_pair_gates_as_the_files_say(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    [pair] = MANIFEST["result_pairs"]
    expected = pair["expected"]
    base, cand = (path_of(RESULTS[pair[k]]) for k in ("baseline", "candidate"))
    monkeypatch.chdir(tmp_path)  # no evalgate.yml: the gate's defaults, said in the report
    out, err = io.StringIO(), io.StringIO()
    code = main(["gate", "--baseline", str(base), "--candidate", str(cand), "--json"], out, err)
    assert code == 0, err.getvalue()
    verdict = json.loads(out.getvalue())
    assert verdict["kind"] == expected["verdict"]
    assert any(expected["reason"] in r for r in verdict["reasons"])
    assert verdict["n_tested"] == expected["paired"]
    assert len(verdict["broken"]) == expected["broken"]
    assert len(verdict["fixed"]) == expected["fixed"]
    assert verdict["unchanged"] == expected["unchanged"]
    assert len(verdict["only_candidate"]) == expected["candidate_only"]
    assert any(
        f"{expected['candidate_only']} cases are in the candidate only" in w
        for w in verdict["warnings"]
    )
    # The broken ones are the tests the manifest names, by their query (counted raw).
    raw = raw_results(RESULTS[pair["candidate"]])
    by_idx = {r["testIdx"]: r for r in raw}
    v1 = {r["testIdx"]: r["success"] for r in raw_results(RESULTS[pair["baseline"]])}
    broken_idx = [i for i, ok in v1.items() if ok and not by_idx[i]["success"]]
    assert len(broken_idx) == expected["broken"]
    queries = Counter(by_idx[i]["testCase"]["vars"]["query"] for i in broken_idx)
    inputs = {c.id: c.input.get("query") for c in read_foreign(cand).run().cases}
    assert Counter(inputs[b["id"]] for b in verdict["broken"]) == queries


REFUSED = {e["id"]: e for e in MANIFEST["refused_results"]}


def _share_rows(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The results of a share body, found in the raw JSON (no evalgate code)."""
    data = json.loads(path_of(entry).read_text(encoding="utf-8"))
    rows: list[dict[str, Any]] = (
        data["data"]["results"]["results"] if "data" in data else data["results"]
    )
    return rows


@pytest.mark.parametrize("entry", MANIFEST["refused_results"], ids=list(REFUSED))
def test_a_share_body_is_read_as_promptfoo_and_refused_for_its_two_prompts(
    entry: dict[str, Any],
) -> None:
    from evalgate.foreign import detect

    path = path_of(entry)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"]
    package = MANIFEST["packages"][entry["package"]]
    assert entry["license"] == package["license"] and (CORPUS / package["license_file"]).is_file()
    expected = entry["expected"]
    # What the manifest says of the file, counted from the raw JSON.
    rows = _share_rows(entry)
    assert len(rows) == expected["results"]
    assert len({r["prompt"]["label"] for r in rows}) == expected["prompts"]
    assert len({r["provider"]["id"] for r in rows}) == expected["providers"]
    # evalgate knows it for promptfoo's, and says why it cannot gate it, naming both prompts.
    assert detect(path, path.read_bytes()) == "promptfoo"
    out, err = io.StringIO(), io.StringIO()
    code = main(["gate", "--baseline", str(path), "--candidate", str(path)], out=out, err=err)
    assert code == 2
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and expected["refusal"] in lines[0] and str(path) in lines[0]
    for label in {r["prompt"]["label"] for r in rows}:
        assert label[:40] in lines[0]
    assert "--filter-prompts" in lines[0]


@pytest.mark.parametrize("entry", MANIFEST["refused_results"], ids=list(REFUSED))
def test_a_share_body_of_one_prompt_is_read_as_its_results(
    entry: dict[str, Any], tmp_path: Path
) -> None:
    # The released file cut to its first prompt's results (the raw JSON edited, nothing else).
    data = json.loads(path_of(entry).read_text(encoding="utf-8"))
    rows = _share_rows(entry)
    first = rows[0]["prompt"]["label"]
    kept = [r for r in rows if r["prompt"]["label"] == first]
    if "data" in data:
        data["data"]["results"]["results"] = kept
    else:
        data["results"] = kept
    path = tmp_path / "one-prompt.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    run = read_foreign(path).run()
    want = Counter(
        json.dumps((r.get("testCase") or {}).get("vars") or r.get("vars"), sort_keys=True)
        for r in kept
    )
    assert Counter(json.dumps(c.input, sort_keys=True) for c in run.cases) == want
    assert len(run.cases) == 4 and run.repeats == 1
    assert all(o.score == 1.0 and o.error is None for c in run.cases for o in c.outcomes)
    assert run.model.name == "openai:gpt-4o-mini"
