"""Results other harnesses made, gated: promptfoo's output (written here in the shape of its
TypeScript types, src/types: OutputFile, EvaluateSummaryV3, EvaluateResult), Inspect logs
(.eval archives and .json, in inspect_ai.log's shape) and JUnit XML, read into the run model;
pairing by test identity, repeats, provenance, and one line for each kind of bad file."""

from __future__ import annotations

import io
import json
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from evalgate.errors import RunFileError
from evalgate.foreign import detect, read_foreign, read_results


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


# ------------------------------------------------------------------------------------------
# promptfoo
# ------------------------------------------------------------------------------------------


def pf_result(
    i: int,
    ok: bool,
    *,
    repeat: int = 0,
    provider: str = "anthropic:messages:m",
    prompt_id: str = "p1",
    error: str | None = None,
) -> dict[str, Any]:
    vars_ = {"q": f"question {i}"}
    return {
        "promptIdx": 0,
        "testIdx": i + 100 * repeat,  # promptfoo numbers every repeat apart
        "testCase": {
            "vars": vars_,
            "description": f"case {i}",
            "assert": [{"type": "equals", "value": "yes"}],
        },
        "promptId": prompt_id,
        "provider": {"id": provider, "label": None},
        "prompt": {"raw": f"Answer: question {i}", "label": "prompt.txt"},
        "vars": {**vars_, "__repeatIndex": repeat},
        "response": {"output": "yes" if ok else "no"},
        "error": error,
        "failureReason": 2 if error else (0 if ok else 1),
        "success": ok and not error,
        "score": 1 if ok else 0,
        "latencyMs": 3,
        "namedScores": {},
    }


def pf_output(results: list[dict[str, Any]], version: int = 3) -> dict[str, Any]:
    return {
        "evalId": "eval-1",
        "results": {
            "version": version,
            "timestamp": "2026-11-30T00:00:00Z",
            "results": results,
            "prompts": [],
            "stats": {"successes": 0, "failures": 0, "errors": 0, "tokenUsage": {}},
        },
        "config": {"description": "triage"},
        "shareableUrl": None,
    }


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_promptfoo_tests_that_look_alike_are_tests_not_repeats(tmp_path: Path) -> None:
    # A tests file with one row twice, run with --repeat 2: two tests of the same vars and
    # description, each with repeat indexes 0 and 1 (promptfoo's __repeatIndex). Two cases of
    # two repeats each, not one case of four; the second told apart by its order.
    results = [pf_result(0, r == 0 or k == 0, repeat=r) for r in range(2) for k in range(2)]
    for n, result in enumerate(results):
        result["testIdx"] = n
    foreign = read_foreign(write_json(tmp_path / "out.json", pf_output(results)))
    run = foreign.run()
    assert [len(c.outcomes) for c in run.cases] == [2, 2]
    first, second = run.cases
    assert second.id == f"{first.id}-2"
    assert [o.score for o in first.outcomes] == [1.0, 1.0]
    assert [o.score for o in second.outcomes] == [1.0, 0.0]
    assert foreign.notes == [
        "1 test shares its vars and description with another test of the file: they are "
        "paired by their order among those (give each a description to pair them by name)"
    ]


def test_promptfoo_tests_pair_by_vars_and_description_with_repeats(tmp_path: Path) -> None:
    results = [pf_result(i, True, repeat=r) for r in range(2) for i in range(3)]
    results.append(pf_result(3, True, error="HTTP 529 overloaded"))
    run = read_results(write_json(tmp_path / "out.json", pf_output(results)))
    assert len(run.cases) == 4
    assert [len(c.outcomes) for c in run.cases] == [2, 2, 2, 1]
    assert run.cases[0].input == {"q": "question 0"}  # the runtime var __repeatIndex is not
    assert run.cases[0].expected == "yes"
    assert run.cases[3].error == "HTTP 529 overloaded"  # an error, not a failure
    assert (run.model.backend, run.model.name, run.suite) == (
        "promptfoo",
        "anthropic:messages:m",
        "triage",
    )
    assert run.repeats == 2


def test_promptfoo_version_2_output_is_read_too(tmp_path: Path) -> None:
    data = pf_output([pf_result(0, True)], version=2)
    data["results"]["table"] = {"head": {"prompts": [], "vars": ["q"]}, "body": []}
    assert len(read_results(write_json(tmp_path / "v2.json", data)).cases) == 1


def test_a_file_of_several_providers_is_refused(tmp_path: Path) -> None:
    results = [pf_result(0, True), pf_result(0, True, provider="openai:gpt-x")]
    path = write_json(tmp_path / "two.json", pf_output(results))
    with pytest.raises(RunFileError) as caught:
        read_results(path)
    assert "2 prompt and provider pairs" in str(caught.value)


def gate_files(
    tmp_path: Path, base: list[dict[str, Any]], cand: list[dict[str, Any]]
) -> tuple[int, str, str]:
    a = write_json(tmp_path / "base.json", pf_output(base))
    b = write_json(tmp_path / "cand.json", pf_output(cand))
    return cli(
        "gate",
        "--baseline",
        str(a),
        "--candidate",
        str(b),
        "--config",
        str(tmp_path / "evalgate.yml"),
    )


def test_a_candidate_that_breaks_12_percent_fails_without_an_evalgate_yml(tmp_path: Path) -> None:
    # 50 cases, 6 broken (12%), none fixed: the exact conditional test's p is 2 * 0.5**6
    # = 0.03125 two-sided... one-sided 0.5**6 = 0.0156 (binomial, 6 of 6 discordant pairs
    # broken), under the paired test's share of alpha.
    base = [pf_result(i, True) for i in range(50)]
    cand = [pf_result(i, i >= 6) for i in range(50)]
    code, out, err = gate_files(tmp_path, base, cand)
    assert code == 1, err
    assert out.startswith("Verdict: FAIL")
    assert "broke 6, fixed 0" in out
    assert "the gate's defaults decided" in out


def test_an_unchanged_candidate_does_not_fail(tmp_path: Path) -> None:
    base = [pf_result(i, True) for i in range(50)]
    code, out, _ = gate_files(tmp_path, base, base)
    assert code == 0
    assert "Verdict: FAIL" not in out


def test_another_model_is_reported_and_another_scorer_is_inconclusive(tmp_path: Path) -> None:
    base = [pf_result(i, True) for i in range(50)]
    other_model = [pf_result(i, True, provider="anthropic:messages:other") for i in range(50)]
    _, out, _ = gate_files(tmp_path, base, other_model)
    assert "different models" in out
    other_scorer = [pf_result(i, True) for i in range(50)]
    for result in other_scorer:
        result["testCase"]["assert"] = [{"type": "icontains", "value": "yes"}]
    _, out, _ = gate_files(tmp_path, base, other_scorer)
    assert "Verdict: INCONCLUSIVE" in out, out
    assert "scorer" in out


def test_the_evalgate_yml_gate_settings_are_used_when_there_is_one(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "v1.txt").write_text("x")
    (tmp_path / "cases.jsonl").write_text('{"id": "a", "input": "x", "expected": "y"}\n')
    (tmp_path / "evalgate.yml").write_text(
        "suites:\n  s:\n    prompts: [prompts/v1.txt]\n    cases: [cases.jsonl]\n"
        "    scorer: {kind: exact}\n    gate: {alpha: 0.001}\n"
    )
    base = [pf_result(i, True) for i in range(50)]
    cand = [pf_result(i, i >= 6) for i in range(50)]
    code, out, _ = gate_files(tmp_path, base, cand)
    # At alpha 0.001 six broken cases (p = 0.0156) are not enough to fail.
    assert code == 0
    assert "Verdict: FAIL" not in out
    assert "defaults" not in out


def test_dropped_and_unpaired_cases_are_counted(tmp_path: Path) -> None:
    base = [pf_result(i, True) for i in range(50)]
    cand = [pf_result(i, True) for i in range(45)]
    broken = pf_result(49, True)
    del broken["success"]
    cand.append(broken)
    _, out, _ = gate_files(tmp_path, base, cand)
    assert "left out of the comparison: results without a success flag (1)" in out
    assert "5 cases are in the baseline only" in out
    assert "its vars and description" in out


def test_nothing_to_pair_is_one_line(tmp_path: Path) -> None:
    base = [pf_result(i, True) for i in range(5)]
    cand = [pf_result(i + 10, True) for i in range(5)]
    code, _, err = gate_files(tmp_path, base, cand)
    assert code == 2
    assert "pairs with one of" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (lambda: json.dumps(pf_output([pf_result(0, True)]))[:200], "truncated"),
        (lambda: json.dumps(pf_output([pf_result(0, True)], version=9)), "version 9"),
        (lambda: "[1, 2]", "not a results file"),
    ],
    ids=["truncated", "unknown-version", "unknown"],
)
def test_a_bad_promptfoo_file_is_one_line_naming_it(
    tmp_path: Path, content: Any, words: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content())
    good = write_json(tmp_path / "good.json", pf_output([pf_result(0, True)]))
    code, _, err = cli("gate", "--baseline", str(bad), "--candidate", str(good))
    assert code == 2
    assert str(bad) in err and words in err, err
    assert err.count("\n") == 1


# ------------------------------------------------------------------------------------------
# Inspect
# ------------------------------------------------------------------------------------------


def inspect_header(status: str = "success", version: int = 2) -> dict[str, Any]:
    return {
        "version": version,
        "status": status,
        "eval": {
            "task": "triage",
            "model": "anthropic/m",
            "created": "2026-11-30T00:00:00+00:00",
            "dataset": {"name": "d"},
            "config": {"epochs": 2},
            "model_generate_config": {},
        },
        "plan": {"steps": [{"solver": "generate", "params": {}}]},
        "results": {"scores": [{"name": "match", "scorer": "match", "params": {}}]},
    }


def inspect_sample(i: int, epoch: int, value: Any) -> dict[str, Any]:
    return {
        "id": i,
        "epoch": epoch,
        "input": f"question {i}",
        "target": "yes",
        "output": {"model": "m", "completion": "yes"},
        "scores": {"match": {"value": value, "answer": "yes"}},
    }


def write_eval(path: Path, header: dict[str, Any] | None, samples: list[dict[str, Any]]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("_journal/start.json", json.dumps({"version": 2}))
        for s in samples:
            archive.writestr(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s))
        if header is not None:
            archive.writestr("header.json", json.dumps(header))
    return path


def test_an_eval_archive_reads_samples_with_epochs_as_repeats(tmp_path: Path) -> None:
    samples = [inspect_sample(i, e, v) for i, v in ((1, "C"), (2, "I"), (3, "P")) for e in (1, 2)]
    run = read_results(write_eval(tmp_path / "log.eval", inspect_header(), samples))
    assert [c.id for c in run.cases] == ["1", "2", "3"]
    assert [len(c.outcomes) for c in run.cases] == [2, 2, 2]
    assert [c.score for c in run.cases] == [1.0, 0.0, 0.5]  # value_to_float: C, I, P
    assert (run.model.name, run.suite) == ("anthropic/m", "triage")


def test_an_eval_archive_compressed_with_zstd_is_read(tmp_path: Path) -> None:
    """inspect_ai 0.3.2xx writes its members with zstd (zip method 93), as here through the
    zstd backport's zipfile (Python 3.14's own from 3.14 on); the stdlib zipfile of 3.11 cannot
    read them, so the reader's own zipfile must."""
    if sys.version_info >= (3, 14):
        import zipfile as zstd_zipfile
    else:
        from backports.zstd import zipfile as zstd_zipfile
    samples = [inspect_sample(i, 1, "C" if i else "I") for i in range(3)]
    path = tmp_path / "log.eval"
    with zstd_zipfile.ZipFile(path, "w", compression=zstd_zipfile.ZIP_ZSTANDARD) as archive:
        for s in samples:
            archive.writestr(f"samples/{s['id']}_epoch_1.json", json.dumps(s))
        archive.writestr("header.json", json.dumps(inspect_header()))
    with zipfile.ZipFile(path) as plain:
        assert {i.compress_type for i in plain.infolist()} == {93}
    run = read_results(path)
    assert [(c.id, c.score) for c in run.cases] == [("0", 0.0), ("1", 1.0), ("2", 1.0)]


def test_a_json_log_is_read_and_the_same_as_its_archive(tmp_path: Path) -> None:
    samples = [inspect_sample(i, 1, "C") for i in range(3)]
    archive = read_results(write_eval(tmp_path / "log.eval", inspect_header(), samples))
    whole = read_results(
        write_json(tmp_path / "log.json", {**inspect_header(), "samples": samples})
    )
    assert [c.model_dump() for c in whole.cases] == [c.model_dump() for c in archive.cases]
    assert detect(tmp_path / "log.json", (tmp_path / "log.json").read_bytes()) == "inspect"


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda p: write_eval(p, None, [inspect_sample(1, 1, "C")]), "unfinished"),
        (lambda p: write_eval(p, inspect_header("started"), []), "unfinished"),
        (lambda p: write_eval(p, inspect_header(version=7), []), "version 7"),
        (lambda p: p.write_bytes(b"PK\x03\x04 cut short") and p, "truncated"),
    ],
    ids=["no-header", "status-started", "unknown-version", "truncated"],
)
def test_a_bad_inspect_log_is_one_line_naming_it(tmp_path: Path, make: Any, words: str) -> None:
    path = tmp_path / "log.eval"
    make(path)
    with pytest.raises(RunFileError) as caught:
        read_results(path)
    assert words in str(caught.value) and str(path) in str(caught.value)


def test_a_cancelled_log_is_an_interrupted_run(tmp_path: Path) -> None:
    run = read_results(
        write_eval(tmp_path / "l.eval", inspect_header("cancelled"), [inspect_sample(1, 1, "C")])
    )
    assert run.interrupted and run.incomplete


# ------------------------------------------------------------------------------------------
# JUnit XML
# ------------------------------------------------------------------------------------------

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="evals" tests="4">
<properties><property name="model" value="claude-x"/></properties>
<testcase classname="test_triage" name="test_case[a]" time="0.1"/>
<testcase classname="test_triage" name="test_case[b]" time="0.1"><failure message="wrong">x</failure></testcase>
<testcase classname="test_triage" name="test_case[c]" time="0.1">
  <rerunFailure message="flaky">x</rerunFailure></testcase>
<testcase classname="test_triage" name="test_case[d]" time="0.1"><error message="boom"/></testcase>
<testcase classname="test_triage" name="test_case[e]" time="0.1"><skipped message="no key"/></testcase>
</testsuite></testsuites>
"""


def test_junit_cases_reruns_and_skips(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    foreign = read_foreign(path)
    run = foreign.run()
    by_id = run.by_id()
    assert by_id["test_triage::test_case[a]"].passed is True
    assert by_id["test_triage::test_case[b]"].passed is False
    assert [o.score for o in by_id["test_triage::test_case[c]"].outcomes] == [0.0, 1.0]
    assert by_id["test_triage::test_case[d]"].error == "boom"
    assert "test_triage::test_case[e]" not in by_id
    assert foreign.dropped == {"skipped test cases": 1}
    assert run.model.name == "claude-x"


def test_junit_with_a_doctype_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bomb.xml"
    path.write_text(
        '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]>'
        "<testsuite><testcase name='&a;'/></testsuite>"
    )
    with pytest.raises(RunFileError) as caught:
        read_results(path, "junit")
    assert "DOCTYPE" in str(caught.value)


@pytest.mark.parametrize("value", [1e30, -5, float("inf"), float("nan"), 1.5])
def test_an_inspect_score_outside_0_to_1_is_kept_out_and_counted(
    tmp_path: Path, value: float
) -> None:
    samples = [inspect_sample(1, 1, "C"), inspect_sample(2, 1, value)]
    foreign = read_foreign(write_eval(tmp_path / "log.eval", inspect_header(), samples))
    run = foreign.run()
    assert [c.id for c in run.cases] == ["1"]  # the other is no share of right: not guessed
    assert foreign.dropped == {"samples without a match score": 1}


def _damaged(path: Path, how: str) -> Path:
    """An archive whose header member is flagged encrypted, whose deflate stream is damaged, or
    whose sample nests past what the JSON parser takes."""
    write_eval(path, inspect_header(), [inspect_sample(1, 1, "C")])
    if how == "deep":
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("header.json", json.dumps(inspect_header()))
            archive.writestr("samples/1_epoch_1.json", "[" * 100_000 + "]" * 100_000)
        return path
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", json.dumps(inspect_header()) + " " * 4096)
    data = bytearray(path.read_bytes())
    if how == "encrypted":
        data[6] |= 0x1  # the local header's general purpose flag: encrypted
        central = data.rfind(b"PK\x01\x02")
        data[central + 8] |= 0x1
    else:
        start = 30 + len("header.json")
        data[start + 5 : start + 40] = b"\xff" * 35  # inside the deflate stream
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("how", ["encrypted", "corrupt", "deep"])
def test_a_damaged_eval_archive_is_one_line(tmp_path: Path, how: str) -> None:
    path = _damaged(tmp_path / "log.eval", how)
    with pytest.raises(RunFileError) as caught:
        read_results(path)
    assert str(path) in str(caught.value)


def test_an_eval_archive_that_unpacks_past_the_bound_is_refused_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few kilobytes of compressed members can declare gigabytes: the declared sizes are
    summed and refused before one is unpacked (zipfile stops each member at its own size)."""
    from evalgate.foreign import inspect

    monkeypatch.setattr(inspect, "_UNPACKED_LIMIT", 1_000_000)
    path = tmp_path / "bomb.eval"
    big = {**inspect_sample(1, 1, "C"), "input": "a" * 400_000}
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", json.dumps(inspect_header()))
        for i in range(3):
            archive.writestr(f"samples/{i}_epoch_1.json", json.dumps({**big, "id": i}))
    assert path.stat().st_size < 10_000  # 1.2 MB declared

    def unpacking(*args: object) -> None:
        raise AssertionError("a member was unpacked")

    # The zipfile the reader uses (the zstd backport's before Python 3.14), not this module's.
    monkeypatch.setattr(inspect.zipfile.ZipFile, "read", unpacking)
    monkeypatch.setattr(inspect.zipfile.ZipFile, "open", unpacking)
    with pytest.raises(RunFileError) as caught:
        read_results(path)
    assert "unpacks to" in str(caught.value) and str(path) in str(caught.value)


def test_an_eval_archive_listing_too_many_members_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalgate.foreign import inspect

    monkeypatch.setattr(inspect, "_MEMBERS_LIMIT", 4)
    samples = [inspect_sample(i, 1, "C") for i in range(4)]
    path = write_eval(tmp_path / "log.eval", inspect_header(), samples)  # 6 members
    with pytest.raises(RunFileError) as caught:
        read_results(path)
    assert "lists 6 members or more" in str(caught.value)
    monkeypatch.setattr(inspect, "_MEMBERS_LIMIT", 6)
    assert len(read_results(path).cases) == 4


def test_an_end_record_that_understates_the_members_does_not_pass_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The end record's count is the file's word: one forged to 2 still meets the bound,
    since the members are counted by their central-directory records."""
    from evalgate.foreign import inspect

    monkeypatch.setattr(inspect, "_MEMBERS_LIMIT", 4)
    samples = [inspect_sample(i, 1, "C") for i in range(4)]
    path = write_eval(tmp_path / "log.eval", inspect_header(), samples)
    data = bytearray(path.read_bytes())
    end = data.rfind(b"PK\x05\x06")
    data[end + 8 : end + 12] = (2).to_bytes(2, "little") * 2  # entries on disk, in all
    path.write_bytes(bytes(data))
    with pytest.raises(RunFileError) as caught:
        read_results(path)
    assert "lists 6 members or more" in str(caught.value)


@pytest.mark.parametrize(
    "tail",
    [
        # A zip64 locator that names several disks: zipfile's end-record reader refuses it.
        b"PK\x06\x07"
        + (0).to_bytes(4, "little")
        + (0).to_bytes(8, "little")
        + (5).to_bytes(4, "little")
        + b"PK\x05\x06"
        + bytes(18),
        b"PK\x05\x06" + b"\xff" * 18,
    ],
    ids=["zip64-disks", "end-record-garbage"],
)
def test_a_forged_end_record_is_one_line(tmp_path: Path, tail: bytes) -> None:
    path = tmp_path / "log.eval"
    path.write_bytes(b"PK\x03\x04" + bytes(100) + tail)
    code, _, err = cli("gate", "--baseline", str(path), "--candidate", str(path))
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err


def test_a_sample_is_kept_without_its_transcript(tmp_path: Path) -> None:
    from evalgate.foreign.inspect import _archive

    sample = {
        **inspect_sample(1, 1, "C"),
        "input": "q" * 50_000,
        "messages": [{"role": "user", "content": "x" * 10_000}],
        "events": [{"event": "model", "output": "y" * 10_000}],
        "output": {"model": "m", "completion": "yes", "choices": ["z" * 10_000]},
    }
    path = write_eval(tmp_path / "log.eval", inspect_header(), [sample])
    _, [kept] = _archive(path, path.read_bytes())
    assert set(kept) == {"id", "epoch", "input", "identity", "target", "scores", "output"}
    assert kept["output"] == {"completion": "yes"}
    assert kept["input"] == "q" * 4_000  # the start a report shows
    [case] = read_results(path).cases
    assert case.outcomes[0].answer == "yes" and case.score == 1.0
    # The case's identity is the whole input's: one that differs past the kept start differs.
    other = write_eval(
        tmp_path / "other.eval", inspect_header(), [{**sample, "input": "q" * 49_999 + "r"}]
    )
    [changed] = read_results(other).cases
    assert changed.hash != case.hash and changed.input == case.input


def test_an_inspect_score_past_any_float_is_kept_out_and_counted(tmp_path: Path) -> None:
    samples = [inspect_sample(1, 1, "C"), inspect_sample(2, 1, 10**400)]
    foreign = read_foreign(write_eval(tmp_path / "log.eval", inspect_header(), samples))
    assert [c.id for c in foreign.run().cases] == ["1"]
    assert foreign.dropped == {"samples without a match score": 1}


def test_an_evalgate_run_against_another_harness_is_refused_as_such(
    tmp_path: Path, make_run: Any
) -> None:
    from evalgate.runs.schema import write_run

    run_file = tmp_path / "run.json"
    write_run(make_run(), run_file)
    results = write_json(tmp_path / "results.json", pf_output([pf_result(0, True)]))
    for baseline, candidate, ours in (
        (run_file, results, "--baseline"),
        (results, "latest:v2", "--candidate"),
    ):
        code, _, err = cli("gate", "--baseline", str(baseline), "--candidate", str(candidate))
        assert code == 2 and err.count("\n") == 1, err
        assert f"{ours} " in err and "is an evalgate run" in err and "gate two of a kind" in err


def test_two_harnesses_results_are_refused_as_such(tmp_path: Path) -> None:
    results = write_json(tmp_path / "results.json", pf_output([pf_result(0, True)]))
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    code, _, err = cli("gate", "--baseline", str(results), "--candidate", str(junit))
    assert code == 2 and "promptfoo results and --candidate junit results" in err, err


def test_a_file_of_no_known_kind_names_the_flag_that_exists(tmp_path: Path) -> None:
    empty = tmp_path / "e.json"
    empty.write_text("")
    results = write_json(tmp_path / "results.json", pf_output([pf_result(0, True)]))
    code, _, err = cli("gate", "--baseline", str(empty), "--candidate", str(results))
    assert code == 2 and "--results-format promptfoo|inspect|junit" in err, err


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("x" * 5_000_000, "not a run file"),
        (JUNIT * 50, "another harness's results"),
        ("", "the run file is empty"),
    ],
    ids=["long", "xml", "empty"],
)
def test_a_file_that_is_not_a_run_is_one_short_line(
    tmp_path: Path, text: str, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conftest import copy_example

    monkeypatch.chdir(copy_example(tmp_path / "shop"))
    path = tmp_path / "run.json"
    path.write_text(text)
    code, _, err = cli("report", str(path))
    assert code == 2 and err.count("\n") == 1 and len(err) < 400, err[:500]
    assert str(path) in err
    assert says in err, err


def test_advice_names_the_harness_own_options(tmp_path: Path) -> None:
    """A foreign file's remedies are its harness's: promptfoo's --repeat, Inspect's epochs and
    eval-retry, never evalgate's --repeats or --resume."""
    results = [pf_result(i, True) for i in range(12)]
    base = write_json(tmp_path / "a.json", pf_output(results))
    cand = write_json(tmp_path / "b.json", pf_output(results))
    code, out, err = cli("gate", "--baseline", str(base), "--candidate", str(cand), "--json")
    assert code in (0, 1), err
    warnings = " ".join(json.loads(out)["warnings"])
    assert "make baselines with `promptfoo eval --repeat 2`" in warnings, warnings
    assert "--repeats" not in warnings

    samples = [inspect_sample(i, 1, "C") for i in range(12)]
    done = write_eval(tmp_path / "done.eval", inspect_header(), samples)
    failed = write_eval(tmp_path / "failed.eval", inspect_header("error"), samples[:5])
    code, out, err = cli("gate", "--baseline", str(done), "--candidate", str(failed), "--json")
    assert code == 0, err  # inconclusive, whose exit is 0 by default
    verdict = json.loads(out)
    assert verdict["kind"] == "inconclusive"
    reasons = " ".join(verdict["reasons"] + verdict["warnings"])
    assert "an Inspect run that did not finish" in reasons and "5 samples logged" in reasons
    assert "inspect eval-retry LOG" in reasons and "--resume" not in reasons
    assert "`inspect eval --epochs 2`" in reasons


def test_report_reads_a_run_file_of_any_name_and_names_other_harnesses_files(
    tmp_path: Path, make_run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conftest import copy_example

    from evalgate.runs.schema import write_run

    monkeypatch.chdir(copy_example(tmp_path / "shop"))
    artefact = tmp_path / "baseline"  # a downloaded artefact, saved without .json
    write_run(make_run(), artefact)
    code, out, err = cli("report", str(artefact))
    assert code in (0, 3) and out, err
    results = write_json(tmp_path / "results.json", pf_output([pf_result(0, True)]))
    code, _, err = cli("report", str(results))
    assert code == 2 and "another harness's results" in err and "evalgate gate" in err, err


def junit_pair(folder: Path, n: int, edits: dict[str, str]) -> tuple[Path, Path]:
    """A JUnit file of ``n`` passing tests t::c0.. and the same with ``edits`` (a test's
    element by the element that replaces it)."""
    cases = "".join(f'<testcase classname="t" name="c{i}"/>' for i in range(n))
    changed = cases
    for old, new in edits.items():
        changed = changed.replace(old, new)
    base, cand = folder / "a.xml", folder / "b.xml"
    base.write_text(f"<testsuite>{cases}</testsuite>")
    cand.write_text(f"<testsuite>{changed}</testsuite>")
    return base, cand


def test_a_broken_junit_case_is_listed_without_fields_junit_has_not(tmp_path: Path) -> None:
    failed = '<testcase classname="t" name="c3"><failure message="wrong">x</failure></testcase>'
    base, cand = junit_pair(tmp_path, 12, {'<testcase classname="t" name="c3"/>': failed})
    _, out, _ = cli("gate", "--baseline", str(base), "--candidate", str(cand))
    [line] = [row for row in out.splitlines() if row.strip().startswith("t::c3")]
    assert "(none)" not in line and '""' not in line, line


def test_a_mistyped_path_beside_results_is_not_a_file_not_a_run(tmp_path: Path) -> None:
    results = write_json(tmp_path / "results.json", pf_output([pf_result(0, True)]))
    missing = tmp_path / "cnadidate.json"
    code, _, err = cli("gate", "--baseline", str(results), "--candidate", str(missing))
    assert code == 2 and "is not a file" in err and "evalgate run" not in err, err


def test_a_skipped_candidate_test_is_counted_once(tmp_path: Path) -> None:
    # One test skipped in the candidate and one renamed: it said "skipped test cases (1)" and
    # "2 cases are in the baseline only", the skipped one counted twice.
    skipped = '<testcase classname="t" name="c3"><skipped message="no key"/></testcase>'
    edits = {'<testcase classname="t" name="c3"/>': skipped, 'name="c7"/>': 'name="c7-renamed"/>'}
    base, cand = junit_pair(tmp_path, 30, edits)
    _, out, _ = cli("gate", "--baseline", str(base), "--candidate", str(cand), "--json")
    verdict = json.loads(out)
    assert verdict["only_baseline"] == ["t::c7"]
    assert verdict["only_candidate"] == ["t::c7-renamed"]
    said = "\n".join(verdict["warnings"])
    assert "skipped test cases (1)" in said
    assert "1 case is in the baseline only" in said and "2 cases" not in said
