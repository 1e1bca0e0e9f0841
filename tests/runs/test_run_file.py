"""The run file's forms: compact JSON, gzip-compressed JSON for large runs, and the indented
JSON of every field that earlier versions wrote; every command reads all three."""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import CliResult

from evalgate.errors import RunFileError
from evalgate.runs import schema
from evalgate.runs.schema import (
    COMPRESS_OVER,
    CaseResult,
    Run,
    find_run,
    iter_runs,
    parse_run,
    read_run,
    runs_dir,
    save_run,
    write_run,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "bike-shop"
GZIP_MAGIC = b"\x1f\x8b"


def many(make_case: Callable[..., CaseResult], n: int) -> list[CaseResult]:
    """n cases, every fourth one wrong, one in a hundred an error."""
    cases = []
    for i in range(n):
        if i % 100 == 99:
            cases.append(make_case(f"c{i:05d}", error="529 overloaded_error: Overloaded"))
        else:
            cases.append(make_case(f"c{i:05d}", "booking", "quote" if i % 4 == 3 else "booking"))
    return cases


def test_a_small_run_is_compact_plain_json(tmp_path: Path, make_run: Callable[..., Run]) -> None:
    run = make_run()
    path = save_run(run, tmp_path)
    text = path.read_text(encoding="utf-8")
    # The head, then a case a line, then the list closed: no indentation.
    lines = text.split("\n")
    assert len(lines) == 2 + len(run.cases) and lines[0].endswith(',"cases":[')
    assert lines[-1] == "]}"
    data = json.loads(text)
    # The run's own fields are all there, defaults too; a case's defaults are left out.
    assert data["schema_version"] == 1 and data["interrupted"] is False
    outcome = data["cases"][0]["outcomes"][0]
    assert "cached" not in outcome and "steps" not in outcome and "error" not in outcome
    assert "split" not in data["cases"][0]  # "dev", the default
    assert read_run(path) == run


def test_the_old_indented_form_still_reads(tmp_path: Path, make_run: Callable[..., Run]) -> None:
    """Earlier versions wrote ``model_dump_json(indent=1)``: every field, one a line."""
    run = make_run()
    old = tmp_path / "old.json"
    old.write_text(run.model_dump_json(indent=1), encoding="utf-8")
    assert old.read_text(encoding="utf-8").count("\n") > 40
    assert read_run(old) == run
    assert parse_run(old.read_bytes()) == run


def test_the_one_line_compact_form_still_reads(
    tmp_path: Path, make_run: Callable[..., Run], make_case: Callable[..., CaseResult]
) -> None:
    """The compact form written before cases went a line each: one line, plain or gzip."""
    run = make_run(cases=many(make_case, 5))
    head = run.model_dump_json(exclude={"cases"})
    cases = ",".join(c.model_dump_json(exclude_defaults=True) for c in run.cases)
    text = head[:-1] + ',"cases":[' + cases + "]}"
    plain, packed = tmp_path / "plain.json", tmp_path / "packed.json"
    plain.write_text(text, encoding="utf-8")
    packed.write_bytes(gzip.compress(text.encode(), mtime=0))
    assert read_run(plain) == run and read_run(packed) == run


@pytest.mark.parametrize(
    "damage",
    [
        lambda lines: lines[:-1],  # the closing line lost: cut short
        lambda lines: lines[:3],  # cut short after two cases
        lambda lines: [*lines[:2], lines[2][1:], *lines[3:]],  # a case's comma lost
        lambda lines: [*lines[:2], lines[2][:-5], *lines[3:]],  # a case's line broken
        lambda lines: [*lines, "{}"],  # more after the end
    ],
    ids=["no-end", "truncated", "no-comma", "broken-case", "trailing"],
)
def test_a_damaged_case_a_line_file_is_a_run_file_error(
    tmp_path: Path,
    make_run: Callable[..., Run],
    make_case: Callable[..., CaseResult],
    damage: Callable[[list[str]], list[str]],
) -> None:
    path = save_run(make_run(cases=many(make_case, 5)), tmp_path)
    lines = path.read_text(encoding="utf-8").split("\n")
    path.write_text("\n".join(damage(lines)), encoding="utf-8")
    with pytest.raises(RunFileError) as caught:
        read_run(path)
    assert str(caught.value).startswith(f"{path}: ")


def test_a_large_run_is_compressed_and_reads_back(
    tmp_path: Path, make_run: Callable[..., Run], make_case: Callable[..., CaseResult]
) -> None:
    run = make_run(cases=many(make_case, 3000))
    plain = run.model_dump_json()
    assert len(plain) > COMPRESS_OVER  # this run is past the threshold
    path = save_run(run, tmp_path)
    data = path.read_bytes()
    assert data.startswith(GZIP_MAGIC)
    assert len(data) < len(plain) / 8
    assert json.loads(gzip.decompress(data))["schema_version"] == 1
    assert read_run(path) == run
    # found and listed like any run file
    assert find_run(run.name, tmp_path) == run
    assert [r.name for _, r in iter_runs(tmp_path)] == [run.name]
    # the same run gives the same bytes (no time stamp in the gzip header)
    again = tmp_path / "again.json"
    write_run(run, again)
    assert again.read_bytes() == data
    assert not list(runs_dir(tmp_path).glob("*.tmp"))


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],  # cut short
        lambda data: data[:20] + bytes(b ^ 0x55 for b in data[20:60]) + data[60:],  # corrupt
        lambda data: gzip.compress(b"\xff\xfe not utf-8", mtime=0),
        lambda data: gzip.compress(b'{"name": "x"}', mtime=0),  # not a run
    ],
    ids=["truncated", "corrupt", "not-utf8", "not-a-run"],
)
def test_a_damaged_compressed_run_file_is_a_run_file_error(
    tmp_path: Path,
    make_run: Callable[..., Run],
    make_case: Callable[..., CaseResult],
    damage: Callable[[bytes], bytes],
) -> None:
    path = save_run(make_run(cases=many(make_case, 3000)), tmp_path)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(RunFileError) as caught:
        read_run(path)
    assert str(caught.value).startswith(f"{path}: ")


def test_a_compressed_file_that_inflates_past_the_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "bomb.json"
    # 64 MiB of spaces compress to about 64 KiB; the limit is lowered to 1 MiB for the test.
    path.write_bytes(gzip.compress(b" " * (64 << 20), mtime=0))
    monkeypatch.setattr(schema, "MAX_RUN_BYTES", 1 << 20)
    with pytest.raises(RunFileError, match="over 1 MiB uncompressed"):
        read_run(path)


def test_every_command_reads_the_compressed_form(
    tmp_path: Path,
    cli: Callable[..., CliResult],
    make_run: Callable[..., Run],
    make_case: Callable[..., CaseResult],
) -> None:
    root = tmp_path / "shop"
    shutil.copytree(EXAMPLE, root)
    config = str(root / "evalgate.yml")
    state = root / ".evalgate"
    cases = many(make_case, 3000)
    base = make_run(cases=cases, name="bike-shop-v1-20250601T120000-aaaa")
    worse = [
        c.model_copy(update={"outcomes": [o.model_copy(update={"score": 0.0}) for o in c.outcomes]})
        if i % 3 == 0
        else c
        for i, c in enumerate(cases)
    ]
    cand = make_run(cases=worse, name="bike-shop-v2-20250601T120000-bbbb", prompt={"name": "v2"})
    base_path, cand_path = save_run(base, state), save_run(cand, state)
    assert base_path.read_bytes().startswith(GZIP_MAGIC)

    code, out, err = cli("report", str(base_path), "--config", config)
    assert code == 0, err
    assert "3000" in out

    code, out, err = cli("list", "--config", config)
    assert code == 0, err
    assert base.name in out and cand.name in out

    code, out, err = cli(
        "gate", "--baseline", str(base_path), "--candidate", str(cand_path), "--config", config
    )
    assert code == 1, err  # a third of the right answers lost: the gate fails
    assert "FAIL" in out

    code, out, err = cli("compare", base.name, cand.name, "--config", config, "--format", "json")
    assert code in (0, 1), err
    assert json.loads(out)


def test_telling_a_run_file_from_foreign_results_reads_its_head_only(
    tmp_path: Path, make_run: Callable[..., Run]
) -> None:
    """A gate asks of each file whether another harness wrote it: an evalgate run file is told
    by its head. The file here is a run's head followed by a hole past the largest run file
    evalgate reads (sparse: nothing is written), which a whole read would refuse."""
    from evalgate.foreign import is_foreign

    path = tmp_path / "run.json"
    write_run(make_run(), path)
    head = path.read_bytes()
    assert head.startswith(b'{"schema_version":')
    with path.open("r+b") as raw:
        raw.truncate(schema.MAX_RUN_BYTES + 1)
    assert not is_foreign(path)
    # A run in the old indented form is told the same way.
    indented = tmp_path / "indented.json"
    indented.write_bytes(json.dumps(json.loads(head), indent=2).encode() + b" " * (1 << 17))
    assert not is_foreign(indented)
    # Another harness's results past the head are still read whole and recognised.
    promptfoo = tmp_path / "promptfoo.json"
    rows = [{"pad": "x" * 100} for _ in range(1000)]
    promptfoo.write_text(json.dumps({"evalId": "e1", "results": {"results": rows}}))
    assert promptfoo.stat().st_size > 1 << 16
    assert is_foreign(promptfoo)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("score", 40.0, "cases.1.outcomes.0.score: should be at most 1.0 (found 40.0)"),
        ("score", -0.5, "cases.1.outcomes.0.score: should be at least 0.0"),
        ("score", float("nan"), "cases.1.outcomes.0.score"),
        ("input_tokens", -1000, "cases.1.outcomes.0.input_tokens: should be at least 0"),
        ("latency_s", float("inf"), "cases.1.outcomes.0.latency_s"),
    ],
    ids=["percent-score", "negative-score", "nan-score", "negative-tokens", "infinite-latency"],
)
def test_an_outcome_out_of_range_is_a_run_file_error(
    tmp_path: Path,
    cli: Callable[..., CliResult],
    make_run: Callable[..., Run],
    make_case: Callable[..., CaseResult],
    field: str,
    value: float,
    words: str,
) -> None:
    # A run file is read from an artefact or a state folder a pull request can write. A score
    # of 40 was counted as 40 passes (a traceback: "successes must be in [0, n]"), NaN as a
    # traceback too, and both exited 1, a failed gate's code.
    root = tmp_path / "shop"
    shutil.copytree(EXAMPLE, root)
    config = str(root / "evalgate.yml")
    base = save_run(make_run(cases=many(make_case, 5)), tmp_path / "a")
    data = json.loads(base.read_text(encoding="utf-8"))
    data["cases"][1]["outcomes"][0][field] = value
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(RunFileError) as caught:
        read_run(bad)
    assert str(caught.value).startswith(f"{bad}: ") and words in str(caught.value)
    for argv in (["report", str(bad)], ["gate", "--baseline", str(base), "--candidate", str(bad)]):
        code, out, err = cli(*argv, "--config", config, "--json")
        assert code == 2, (argv, out, err)
        assert "Traceback" not in err
        error = json.loads(out)["error"]
        assert (error["kind"], error["exit_code"]) == ("RunFileError", 2)
        assert str(bad) in error["message"] and f"outcomes.0.{field}" in error["message"]


def test_a_journal_is_named_by_its_run_alone(tmp_path: Path) -> None:
    # `latest:` looks over saved runs, and a name is one file of the journal folder: a pull
    # request's committed `.evalgate/journal/latest:v1.jsonl`, or a `../`, names no journal.
    state = tmp_path / ".evalgate"
    (state / "journal").mkdir(parents=True)
    for name in ("latest:v1", "latest", "shop-v1-x"):
        (state / "journal" / f"{name}.jsonl").write_text("{}\n", encoding="utf-8")
    (tmp_path / "outside.jsonl").write_text("{}\n", encoding="utf-8")
    assert schema.journal_for("latest:v1", state) is None
    assert schema.journal_for("latest", state) is None
    assert schema.journal_for("../../outside", state) is None
    assert schema.journal_for("shop-v1-x", state) == state / "journal" / "shop-v1-x.jsonl"
