"""Sharded runs and `evalgate merge`: stable slices by case id hash, merged back into one run.

shard_of is checked against values computed here with hashlib; the pipeline's slices against
the unsharded run of the bike-shop example, case by case; merge_runs against every way shard
files can fail to be slices of one run (a clear UserError, exit 2 through the CLI).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import CREATED, EXAMPLE, fake_backend, sha

from evalgate.cases.read import CaseSet
from evalgate.cli import main
from evalgate.config.load import load_config
from evalgate.errors import UserError
from evalgate.running.suite import RunSpec, load_prompt, load_suite_cases, run_suite, shard_of
from evalgate.runs.merge import merge_runs
from evalgate.runs.schema import CaseResult, Run, find_run

WHOLE = sha("the whole case set")


@pytest.fixture(autouse=True)
def not_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)  # CI would switch the response cache on


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


# ------------------------------------------------------------------------------------------
# shard_of
# ------------------------------------------------------------------------------------------


def expected_shard(case_id: str, shards: int) -> int:
    """The documented rule, spelled out independently: the first 8 bytes of sha256(id) as a
    big-endian integer, modulo N, 1-based."""
    return int(hashlib.sha256(case_id.encode("utf-8")).hexdigest()[:16], 16) % shards + 1


@pytest.mark.parametrize("shards", [1, 2, 3, 4, 7, 16])
def test_shard_of_is_a_hash_of_the_case_id(shards: int) -> None:
    ids = ["bk-001", "bk-002", "bk-143", "case a", "ünïcödé-id", ""]
    assert [shard_of(i, shards) for i in ids] == [expected_shard(i, shards) for i in ids]


def test_shard_of_known_values() -> None:
    # sha256("bk-001") starts 796973b67526c85c..., so its shard of N is 0x796973b67526c85c % N + 1.
    assert hashlib.sha256(b"bk-001").hexdigest()[:16] == "796973b67526c85c"
    assert shard_of("bk-001", 3) == 0x796973B67526C85C % 3 + 1 == 2
    assert shard_of("bk-001", 2) == 0x796973B67526C85C % 2 + 1 == 1
    assert shard_of("bk-001", 7) == 0x796973B67526C85C % 7 + 1 == 1


def test_adding_cases_never_moves_a_case_to_another_shard() -> None:
    before = [f"bk-{i:03d}" for i in range(1, 201)]
    after = ["new-case", *before[:50], *(f"zz-{i}" for i in range(300)), *before[50:]]
    for shards in (2, 3, 5):
        old = {i: shard_of(i, shards) for i in before}
        new = {i: shard_of(i, shards) for i in after}
        assert {i: new[i] for i in before} == old


@pytest.mark.parametrize("shards", [2, 3, 4, 8])
def test_every_case_is_in_exactly_one_shard_and_shards_are_balanced(shards: int) -> None:
    ids = [f"case-{i:05d}" for i in range(4000)]
    counts = Counter(shard_of(i, shards) for i in ids)
    assert set(counts) == set(range(1, shards + 1))
    assert sum(counts.values()) == len(ids)
    # A shard's size is Bin(4000, 1/N) for a good hash: 4 SDs covers every shard of every N here
    # (a deterministic check, so the margin only has to be honest, not lucky).
    mean = len(ids) / shards
    sd = math.sqrt(len(ids) * (1 / shards) * (1 - 1 / shards))
    assert all(abs(n - mean) < 4 * sd for n in counts.values()), counts


# ------------------------------------------------------------------------------------------
# The pipeline's slices
# ------------------------------------------------------------------------------------------


def run_cases(case_set: CaseSet, shard: tuple[int, int] | None) -> Run:
    loaded = load_config(EXAMPLE / "evalgate.yml")
    name, suite = loaded.suite(None)
    spec = RunSpec(
        suite_name=name,
        suite=suite,
        prompt=load_prompt(loaded, suite, "v2"),
        cases=case_set,
        shard=shard,
    )
    return run_suite(spec, fake_backend(suite.model.options, loaded.root), loaded.root)


def test_pipeline_shards_partition_the_suite_and_stay_put_as_cases_are_added() -> None:
    loaded = load_config(EXAMPLE / "evalgate.yml")
    _, suite = loaded.suite(None)
    every = load_suite_cases(loaded, suite)
    dev = [c for c in every.cases if c.split == "dev"]
    fewer = CaseSet(cases=tuple(dev[:90]), file_hashes=every.file_hashes)
    whole = run_cases(every, None)
    slices = {i: run_cases(every, (i, 3)) for i in (1, 2, 3)}
    ids = {i: [c.id for c in run.cases] for i, run in slices.items()}
    # Each shard holds exactly its hash slice, in the suite's order, and knows the whole set.
    for i, run in slices.items():
        assert ids[i] == [c.id for c in whole.cases if expected_shard(c.id, 3) == i]
        assert run.shard == f"{i}/3"
        assert run.shard_of_sha256 == whole.cases_sha256
    assert sorted(i for run_ids in ids.values() for i in run_ids) == sorted(
        c.id for c in whole.cases
    )
    # Fewer cases: every one of them is in the same shard as with the full suite.
    for i in (1, 2, 3):
        small = [c.id for c in run_cases(fewer, (i, 3)).cases]
        assert small == [c for c in ids[i] if c in {d.id for d in dev[:90]}]


# ------------------------------------------------------------------------------------------
# merge_runs on hand-built shards
# ------------------------------------------------------------------------------------------


@pytest.fixture
def shards(make_run: Callable[..., Run], make_case: Callable[..., CaseResult]) -> list[Run]:
    """Three shards of a six-case run, the second slower and later than the others."""

    def shard(i: int, **overrides: Any) -> Run:
        cases = [make_case(f"s{i}-c{j}", "quote", "quote" if j else "other") for j in (1, 2)]
        fields: dict[str, Any] = dict(
            name=f"bike-shop-v1-2025060{i}T120000-ab{i}d",
            shard=f"{i}/3",
            shard_of_sha256=WHOLE,
            cases_sha256=sha(f"shard {i}"),
            cases=cases,
        )
        return make_run(**(fields | overrides))

    return [
        shard(1),
        shard(2, wall_s=9.0, created_at=CREATED + timedelta(minutes=5)),
        shard(3),
    ]


def test_merge_combines_shards_in_shard_order(shards: list[Run]) -> None:
    merged = merge_runs([shards[2], shards[0], shards[1]])
    assert [c.id for c in merged.cases] == [f"s{i}-c{j}" for i in (1, 2, 3) for j in (1, 2)]
    assert merged.shard is None and merged.shard_of_sha256 is None
    assert merged.cases_sha256 == WHOLE  # the merged run is the whole case set again
    assert merged.name == "bike-shop-v1-20250603T120000-merged"
    assert merged.wall_s == 9.0  # shards run side by side: the slowest is the wall time
    assert merged.created_at == CREATED + timedelta(minutes=5)
    assert not merged.interrupted
    assert merged.prompt == shards[0].prompt and merged.model == shards[0].model
    # The inputs are left as they were.
    assert shards[0].shard == "1/3" and len(shards[0].cases) == 2


def test_merge_orders_ten_or_more_shards_by_number(
    make_run: Callable[..., Run], make_case: Callable[..., CaseResult]
) -> None:
    runs = [
        make_run(shard=f"{i}/12", shard_of_sha256=WHOLE, cases=[make_case(f"c{i:02d}")])
        for i in range(12, 0, -1)
    ]
    merged = merge_runs(runs)
    assert [c.id for c in merged.cases] == [f"c{i:02d}" for i in range(1, 13)]


def test_an_interrupted_shard_makes_the_merged_run_interrupted(shards: list[Run]) -> None:
    shards[1] = shards[1].model_copy(update={"interrupted": True})
    assert merge_runs(shards).interrupted


def _with(run: Run, **update: Any) -> Run:
    """A copy of a run with fields (dotted into prompt / model) changed."""
    top = {k: v for k, v in update.items() if "." not in k}
    for key, value in update.items():
        if "." in key:
            part, field = key.split(".")
            top[part] = getattr(run, part).model_copy(update={field: value})
    return run.model_copy(update=top)


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ({"prompt.sha256": sha("another prompt")}, "differ in prompt"),
        ({"model.name": "claude-haiku-4-5"}, "differ in model ("),
        ({"model.backend": "anthropic"}, "differ in model backend"),
        ({"model.temperature": 0.7}, "differ in temperature"),
        ({"model.max_tokens": 512}, "differ in max_tokens"),
        ({"model.options_sha256": sha("other options")}, "differ in model options"),
        ({"scorer_sha256": sha("another scorer")}, "differ in scorer"),
        ({"tools_sha256": sha("other tools")}, "differ in tools"),
        ({"repeats": 2}, "differ in repeats (1 vs 2)"),
        ({"limited_to": 5}, "differ in limit"),
        ({"shard_of_sha256": sha("other cases")}, "differ in case set"),
        ({"shard": "2/4"}, "differ in shard count (3 vs 4)"),
        ({"suite": "other-suite"}, "differ in suite"),
    ],
)
def test_merge_refuses_shards_of_different_runs(
    shards: list[Run], update: dict[str, Any], message: str
) -> None:
    shards[1] = _with(shards[1], **update)
    with pytest.raises(UserError, match=re.escape(message)) as caught:
        merge_runs(shards)
    assert shards[0].name in caught.value.what and shards[1].name in caught.value.what
    assert "same prompt, cases, model and settings" in (caught.value.fix or "")


def test_merge_refuses_a_missing_shard(shards: list[Run]) -> None:
    with pytest.raises(UserError, match=re.escape("shard 2/3 missing")) as caught:
        merge_runs([shards[0], shards[2]])
    assert caught.value.fix == "pass each shard of the run exactly once"


def test_merge_refuses_a_duplicated_shard(shards: list[Run]) -> None:
    with pytest.raises(UserError, match=re.escape("shard 2/3 given twice")):
        merge_runs([*shards, shards[1]])
    # Both at once, each named (it printed "missing [1]", a Python list, and no more).
    with pytest.raises(UserError, match=re.escape("shard 2/3 given twice; shard 1/3 missing")):
        merge_runs([shards[1], shards[1], shards[2]])


def test_merge_refuses_a_run_that_is_not_a_shard(shards: list[Run]) -> None:
    whole = shards[1].model_copy(update={"shard": None, "shard_of_sha256": None})
    with pytest.raises(UserError, match="is not a shard") as caught:
        merge_runs([shards[0], whole, shards[2]])
    assert whole.name in caught.value.what
    assert "--shard i/N" in (caught.value.fix or "")


def test_merge_refuses_nothing_and_a_case_in_two_shards(shards: list[Run]) -> None:
    with pytest.raises(UserError, match="nothing to merge"):
        merge_runs([])
    shards[2] = shards[2].model_copy(update={"cases": shards[1].cases})
    with pytest.raises(UserError, match="a case appears in two shards"):
        merge_runs(shards)


# ------------------------------------------------------------------------------------------
# The CLI: run --shard, merge, gate
# ------------------------------------------------------------------------------------------


def saved_path(err: str) -> Path:
    found = re.search(r"^saved \S+ to (.+\.json)$", err, re.MULTILINE)
    assert found, err
    return Path(found.group(1))


def test_sharded_cli_runs_merge_into_the_unsharded_run(bike_shop: Path) -> None:
    config = str(bike_shop / "evalgate.yml")
    paths = []
    for i in (1, 2, 3):
        code, _, err = cli("run", "v2", "--shard", f"{i}/3", "--config", config)
        assert code == 0, err
        paths.append(saved_path(err))
    code, _, err = cli("run", "v2", "--config", config)
    assert code == 0, err
    whole = find_run(str(saved_path(err)), bike_shop / ".evalgate")

    merged_file = bike_shop / "out" / "merged.json"
    code, out, err = cli(
        "merge", *map(str, paths), "--output", str(merged_file), "--config", config, "--json"
    )
    assert code == 0, err
    assert f"merged 3 shards into {merged_file}" in err
    merged = find_run(str(merged_file), bike_shop / ".evalgate")
    summary = json.loads(out)
    assert summary["accuracy"]["n"] == len(whole.cases) == 143

    # Case by case, the merged run is the unsharded one.
    assert sorted(c.id for c in merged.cases) == sorted(c.id for c in whole.cases)
    by_id = whole.by_id()
    for case in merged.cases:
        other = by_id[case.id]
        assert (case.hash, case.split, case.answer, case.score) == (
            other.hash,
            other.split,
            other.answer,
            other.score,
        ), case.id
    accuracy = [sum(c.score or 0 for c in r.cases) / len(r.cases) for r in (merged, whole)]
    assert accuracy[0] == accuracy[1]
    assert merged.cases_sha256 == whole.cases_sha256
    assert merged.shard is None

    # The gate decides on the merged run, as baseline and as candidate.
    code, out, err = cli(
        "gate", "--baseline", str(merged_file), "--candidate", "v3", "--config", config, "--json"
    )
    assert code == 0, err
    verdict = json.loads(out)
    assert verdict["kind"] == "pass" and verdict["unchanged"] == 143
    code, out, err = cli(
        "gate",
        "--baseline",
        whole.name,
        "--candidate",
        str(merged_file),
        "--config",
        config,
        "--json",
    )
    assert code == 0, err
    assert json.loads(out)["unchanged"] == 143

    # Without --output the merged run joins the saved runs.
    code, _, err = cli("merge", *map(str, paths), "--config", config)
    assert code == 0, err
    assert find_run(merged.name, bike_shop / ".evalgate").cases == merged.cases


def test_cli_merge_errors_are_one_line_and_exit_2(bike_shop: Path, shards: list[Run]) -> None:
    config = str(bike_shop / "evalgate.yml")
    files = []
    for run in [*shards, _with(shards[1], **{"prompt.sha256": sha("edited")})]:
        path = bike_shop / "shards" / f"{run.name}-{len(files)}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(run.model_dump_json(), encoding="utf-8")
        files.append(str(path))
    for argv, message in [
        ([files[0], files[2]], "shard 2/3 missing"),
        ([*files[:3], files[1]], "shard 2/3 given twice"),
        ([files[0], files[3], files[2]], "differ in prompt"),
    ]:
        code, out, err = cli("merge", *argv, "--config", config)
        assert code == 2, err
        assert err.startswith("error: ") and message in err
        assert err.count("\n") == 1 and "Traceback" not in err
        assert out == ""
    # A flag that is not i/N never reaches the run.
    with pytest.raises(SystemExit) as exited:
        cli("run", "v2", "--shard", "4/3", "--config", config)
    assert exited.value.code == 2


@pytest.mark.parametrize("form", ["case-a-line", "one line"])
def test_latest_is_the_merged_run_not_its_last_shard(
    tmp_path: Path, shards: list[Run], form: str
) -> None:
    # merge dates the merged run as its last shard: at equal times `latest:` took the shard.
    from evalgate.runs.schema import save_run

    merged = merge_runs(shards)
    last = max(shards, key=lambda r: r.created_at)
    assert merged.created_at == last.created_at
    state = tmp_path / ".evalgate"
    folder = state / "runs"
    folder.mkdir(parents=True)
    for name, run in (("b-merged", merged), ("a-shard", last)):
        if form == "one line":
            (folder / f"{name}.json").write_text(run.model_dump_json(), encoding="utf-8")
        else:
            save_run(run.model_copy(update={"name": name}), state)
    found = find_run(f"latest:{merged.prompt.name}", state)
    assert found.shard is None and len(found.cases) == len(merged.cases)


def test_latest_of_a_suite_is_a_run_of_that_suite(tmp_path: Path, shards: list[Run]) -> None:
    # `gate --suite alpha --baseline latest:v1` took the newest v1 run of any suite.
    from evalgate.errors import RunFileError
    from evalgate.runs.schema import save_run

    merged = merge_runs(shards)
    state = tmp_path / ".evalgate"
    older = merged.model_copy(update={"name": "alpha-run", "suite": "alpha"})
    newer = merged.model_copy(
        update={"name": "beta-run", "suite": "beta", "created_at": merged.created_at + timedelta(1)}
    )
    save_run(older, state)
    save_run(newer, state)
    version = merged.prompt.name
    assert find_run(f"latest:{version}", state).suite == "beta"
    assert find_run(f"latest:{version}", state, "alpha").suite == "alpha"
    with pytest.raises(RunFileError, match=f"no saved run of prompt '{version}' in suite 'gamma'"):
        find_run(f"latest:{version}", state, "gamma")
