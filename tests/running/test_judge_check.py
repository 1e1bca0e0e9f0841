"""`evalgate judge check` end to end: a `command` judge whose agreement with the labels is known.

The judge is a small program (run by the real command backend) that passes a reply when it
contains the word "refund". The labels are written so that each split's 2x2 table is known:

    dev     (8, 1, 2, 9), n = 20: the proportions of (40, 5, 10, 45), so kappa = 0.70
    holdout (4, 0, 1, 5), n = 10: po = 0.9, judge passes 0.4, people 0.5, pe = 0.5, kappa = 0.8

(a: both pass, b: judge pass / human fail, c: judge fail / human pass, d: both fail.)
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from conftest import CliResult, copy_example

from evalgate.analysis.calibration import bootstrap_kappa
from evalgate.backends.base import Reply, Request
from evalgate.backends.fake import FakeJudgeRules, fake_judgement, load_options
from evalgate.cases.holdout import read_ledger
from evalgate.cases.judge_labels import load_labels, split_policy
from evalgate.cases.split import hashed_side
from evalgate.config.load import load_config
from evalgate.config.models import JudgeScorer as JudgeConfig
from evalgate.errors import BackendError, CaseFileError, ConfigError
from evalgate.running.judge_check import floor_reasons, read_report
from evalgate.runs.schema import read_run
from evalgate.scorers.judge import JudgeScorer

Z975 = 1.959963984540054
RULE = {"label": "x", "phrases": ["x"]}

JUDGE = """\
import hashlib, json, pathlib, re, sys
request = json.load(sys.stdin)
turn = request["messages"][-1]["content"]
reply = re.search(r"<reply>\\n(.*)\\n</reply>\\s*$", turn, re.S).group(1)
score = 1 if "refund" in reply else 0
if "maybe" in reply:  # an unsteady judge: alternates on each call for the same reply
    counter = pathlib.Path("counts") / hashlib.sha256(reply.encode()).hexdigest()
    counter.parent.mkdir(exist_ok=True)
    calls = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(calls + 1))
    score = calls % 2
print(json.dumps({"score": score, "reason": "mentions a refund" if score else "no refund"}))
"""


def label_rows(split: str, a: int, b: int, c: int, d: int, prefix: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    cells = [("refund now", "pass", a), ("refund now", "fail", b), ("sorry", "pass", c)]
    cells.append(("sorry", "fail", d))
    for reply, human, count in cells:
        for _ in range(count):
            n = len(rows)
            rows.append(
                {
                    "id": f"{prefix}{n:02d}",
                    "message": f"message {prefix}{n}",
                    "group": f"{prefix}g{n % 3}",
                    "reply": f"{reply} ({prefix}{n})",
                    "human": human,
                    "split": split,
                }
            )
    return rows


def write_project(
    root: Path,
    *,
    judge: dict[str, Any] | None = None,
    rows: list[dict[str, Any]] | None = None,
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "judge.py").write_text(JUDGE, encoding="utf-8")
    (root / "prompts").mkdir(exist_ok=True)
    (root / "prompts" / "v1.txt").write_text("Answer the customer.", encoding="utf-8")
    (root / "cases.jsonl").write_text(
        json.dumps({"id": "c1", "message": "hello", "split": "dev"}) + "\n", encoding="utf-8"
    )
    if rows is None:
        rows = label_rows("dev", 8, 1, 2, 9, "d") + label_rows("holdout", 4, 0, 1, 5, "h")
    (root / "labels.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
    )
    suite = {
        "prompts": "prompts/*.txt",
        "cases": "cases.jsonl",
        "fields": {"input": ["message"]},
        "template": "{{ message }}",
        # The system under test is not run here: any valid model will do.
        "model": {"backend": "fake", "options": {"rules": {"rules": [RULE]}}},
        "scorer": {
            "kind": "judge",
            "rubric": "Pass a reply that offers a refund.",
            "model": {
                "backend": "command",
                "name": "refund-judge",
                "options": {"command": [sys.executable, "judge.py"]},
            },
        },
        "judge": {"labels": "labels.jsonl", "min_labels": 10, "min_kappa": 0.3} | (judge or {}),
    }
    config = {"version": 1, "suites": {"shop": suite}}
    (root / "evalgate.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return root / "evalgate.yml"


def fce_se(a: int, b: int, c: int, d: int) -> float:
    """Fleiss-Cohen-Everitt standard error, written out once more for the holdout table."""
    n = a + b + c + d
    p11, p12, p21, p22 = a / n, b / n, c / n, d / n
    r1, r2, c1, c2 = p11 + p12, p21 + p22, p11 + p21, p12 + p22
    pe = r1 * c1 + r2 * c2
    k = (p11 + p22 - pe) / (1 - pe)
    w = 1 - k
    big_a = p11 * (1 - (r1 + c1) * w) ** 2 + p22 * (1 - (r2 + c2) * w) ** 2
    big_b = w * w * (p12 * (c1 + r2) ** 2 + p21 * (c2 + r1) ** 2)
    big_c = (k - pe * w) ** 2
    return math.sqrt((big_a + big_b - big_c) / (n * (1 - pe) ** 2))


def test_holdout_standard_error_by_hand() -> None:
    # (4, 0, 1, 5): A = 0.4*0.82^2 + 0.5*0.78^2 = 0.57316; B = 0.04 * 0.1 * 0.9^2 = 0.00324;
    # C = (0.8 - 0.5*0.2)^2 = 0.49; var = 0.0864 / (10 * 0.25) = 0.03456.
    assert fce_se(4, 0, 1, 5) == pytest.approx(math.sqrt(0.03456), abs=1e-12)


def test_a_command_judge_with_known_agreement(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    config = write_project(tmp_path / "p")
    code, out, err = cli(
        "judge", "check", "--config", str(config), "--json", "--interval", "analytic"
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["interval"] == "analytic"
    assert report["calls"] == 30  # one judge call a label
    dev, holdout = report["splits"]
    assert dev["split"] == "dev" and holdout["split"] == "holdout"
    assert dev["agreement"]["table"] == {
        "both_pass": 8,
        "judge_only": 1,
        "human_only": 2,
        "both_fail": 9,
    }
    assert dev["agreement"]["agreement"]["hits"] == 17
    assert dev["agreement"]["kappa"]["value"] == pytest.approx(0.70, abs=1e-12)
    # The dev table has the proportions of (40, 5, 10, 45) at n = 20: var = 0.126225 / (20 * 0.25)
    assert dev["agreement"]["kappa"]["se"] == pytest.approx(math.sqrt(0.126225 / 5), abs=1e-9)
    assert holdout["agreement"]["kappa"]["value"] == pytest.approx(0.8, abs=1e-12)
    low = 0.8 - Z975 * math.sqrt(0.03456)  # 0.4356
    assert holdout["agreement"]["kappa"]["low"] == pytest.approx(low, abs=1e-9)
    # The floor is read on the holdout: 10 labels (min 10), kappa low 0.436 >= 0.3.
    assert report["floor"]["split"] == "holdout" and report["floor"]["ok"]
    # Dev disagreements are listed, the holdout's never: 3 dev, 1 holdout disagreement.
    assert {d["id"] for d in dev["disagreements"]} == {"d08", "d09", "d10"}
    assert holdout["disagreements"] == [] and holdout["more_disagreements"] == 0
    saved = (tmp_path / "p" / ".evalgate" / "judge" / "shop.json").read_text(encoding="utf-8")
    for text in (out, saved):
        assert "h0" not in text and "refund now (h" not in text and "sorry (h" not in text
    # The holdout read is in the ledger, with its agreement only.
    (record,) = read_ledger(tmp_path / "p" / ".evalgate" / "holdout-ledger.jsonl")
    assert record.purpose == "judge check" and record.n == 10 and record.score == 0.9


def test_the_holdouts_groups_are_counted_never_named(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    # The holdout labels' groups are hg0, hg1, hg2 (label_rows); the one holdout disagreement
    # (a "sorry" reply people passed) is in one of them. Naming that group beside its agreement
    # would tell rubric tuning which holdout replies the judge gets wrong.
    config = write_project(tmp_path / "p")
    code, out, err = cli("judge", "check", "--config", str(config), "--json")
    assert code == 0, err
    holdout = json.loads(out)["splits"][1]["agreement"]
    assert [(g["n"], g["agreement"]["hits"]) for g in holdout["groups"]] == [
        (3, 2),
        (3, 3),
        (4, 4),
    ]  # 10 labels in groups of 4, 3, 3 (n % 3); sorted by agreement, then size
    text = cli("judge", "check", "--config", str(config))[1]
    saved = (tmp_path / "p" / ".evalgate" / "judge" / "shop.json").read_text(encoding="utf-8")
    for shown in (out, text, saved):
        assert not re.search(r"\bhg[0-9]", shown), "a holdout group is named"
    assert "dg0" in text or "dg1" in text or "dg2" in text  # dev groups are named
    assert "By group       3 groups, 1 with a disagreement\n" in text


def test_the_default_interval_is_the_group_bootstrap_and_the_gate_wants_it(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    config = write_project(tmp_path / "p")
    code, out, err = cli("judge", "check", "--config", str(config), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["interval"] == "bootstrap"
    holdout = report["splits"][1]["agreement"]
    # The holdout's 10 labels (4, 0, 1, 5) fall in 3 groups (label_rows: hg0, hg1, hg2): the
    # bootstrap resamples those 3, seeded with gate.seed (0), as calibration.bootstrap_kappa.
    assert holdout["kappa_interval"].startswith(
        "bootstrap (BCa, 2000 resamples of the labels' groups, seed 0)"
    )
    rows = label_rows("holdout", 4, 0, 1, 5, "h")
    pairs = [(r["reply"].startswith("refund"), r["human"] == "pass") for r in rows]
    expected = bootstrap_kappa(pairs, [r["group"] for r in rows], seed=0)
    assert expected is not None
    assert holdout["kappa"] == expected.model_dump()
    text = cli("judge", "check", "--config", str(config))[1]
    assert "Kappa's interval: bootstrap (BCa" in text
    # A check saved with another interval than judge.interval is not the gate's.
    cli("judge", "check", "--config", str(config), "--interval", "analytic")
    saved = read_report(tmp_path / "p" / ".evalgate", "shop")
    assert saved is not None and saved.interval == "analytic"
    (reason,) = floor_reasons(saved, saved.judge_sha256, saved.labels_sha256, "bootstrap")
    assert "last checked with the analytic kappa interval, and judge.interval is bootstrap" in (
        reason
    )


def test_below_the_floor_exits_1_with_the_reason(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    config = write_project(
        tmp_path / "p", judge={"min_kappa": 0.6, "min_labels": 11, "interval": "analytic"}
    )
    code, out, _ = cli("judge", "check", "--config", str(config))
    assert code == 1
    assert "NOT MET" in out
    # Each reason on a line of its own, right under the Floor line (no blank line between).
    lines = out.splitlines()
    [at] = [i for i, line in enumerate(lines) if line.startswith("Floor ")]
    assert lines[at].endswith("NOT MET, gates it scores are inconclusive")
    assert lines[at + 1].startswith("  - the judge is checked on 10 holdout")
    assert all(line.startswith("  - ") for line in lines[at + 1 : at + 3])
    assert "on 10 holdout labels, under judge.min_labels = 11" in out
    assert "kappa 0.80 (95% CI 0.44 to 1.00) on 10 holdout labels" in out
    assert "judge.min_kappa = 0.6" in out


def test_dev_only_reads_no_holdout_and_says_the_floor_is_optimistic(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    config = write_project(tmp_path / "p")
    code, out, _ = cli("judge", "check", "--config", str(config), "--split", "dev")
    assert code == 0
    assert "holdout: 10 labels not read" in out
    assert "Floor (dev labels)" in out and "which rubric tuning has seen" in out
    assert "met on dev; the gate also wants the holdout checked" in out
    assert not (tmp_path / "p" / ".evalgate" / "holdout-ledger.jsonl").exists()
    # The gate does not take a dev-only check for trust.
    report = read_report(tmp_path / "p" / ".evalgate", "shop")
    assert report is not None
    (reason,) = floor_reasons(report, report.judge_sha256, report.labels_sha256)
    assert reason.startswith("the judge was last checked on its dev labels only")


def test_repeats_measure_the_judges_flips(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    # 16 steady labels and 4 whose judge alternates pass / fail: with 2 repeats each of the 4
    # has 1 pass of 2, so k(R - k) = 1 over R(R-1)/2 = 1 pair: flip rate 4 / 20 = 0.2.
    rows = label_rows("dev", 8, 0, 0, 8, "d")
    rows += [
        {"id": f"m{i}", "message": f"m{i}", "reply": f"maybe {i}", "human": "pass", "split": "dev"}
        for i in range(4)
    ]
    config = write_project(tmp_path / "p", rows=rows, judge={"min_labels": 1})
    code, out, err = cli("judge", "check", "--config", str(config), "--repeats", "2", "--json")
    assert code in (0, 1), err
    assert json.loads(out)["calls"] == 40  # 20 labels, 2 calls each
    flips = json.loads(out)["splits"][0]["flips"]
    assert flips == {"repeats": 2, "rate": pytest.approx(0.2), "labels_flipped": 4}


def test_labels_split_by_their_own_salt_and_a_written_split_wins(tmp_path: Path) -> None:
    rows = [{"id": f"x{i}", "message": f"m{i}", "reply": "r", "human": True} for i in range(40)]
    rows[0]["split"] = "holdout"
    config = write_project(tmp_path / "p", rows=rows, judge={"salt": "labels-salt"})
    loaded = load_config(config)
    _, suite = loaded.suite(None)
    labels = load_labels(loaded.root / "labels.jsonl", suite)
    policy = split_policy(suite.judge, suite)  # type: ignore[arg-type]
    assert policy.salt == "labels-salt" and policy.holdout_fraction == 0.3
    assert labels[0].split == "holdout"
    # No group field on these rows: the key is the id, hashed with the labels' salt.
    for label in labels[1:]:
        assert label.split == hashed_side(label.id, policy)
    assert {x.split for x in labels} == {"dev", "holdout"}


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"id": "a", "message": "m", "human": "pass"}, "missing reply field 'reply'"),
        ({"id": "a", "message": "m", "reply": "r"}, "missing human verdict field 'human'"),
        ({"id": "a", "message": "m", "reply": "r", "human": "maybe"}, "field 'human' is 'maybe'"),
        ({"id": "a", "message": "m", "reply": "r", "human": 1.5}, "outside [0, 1]"),
        ({"id": "a", "message": "m", "reply": 3, "human": "pass"}, "must be the reply's text"),
        ({"message": "m", "reply": "r", "human": "pass"}, "missing id field 'id'"),
        (
            {"id": "a", "message": "m", "reply": "r", "human": "pass", "split": "regression"},
            "split 'regression'",
        ),
    ],
)
def test_bad_labels_name_the_file_and_line(
    tmp_path: Path, row: dict[str, Any], message: str
) -> None:
    good = {"id": "ok", "message": "m", "reply": "r", "human": "fail"}
    config = write_project(tmp_path / "p", rows=[good, row])
    loaded = load_config(config)
    _, suite = loaded.suite(None)
    with pytest.raises(CaseFileError) as caught:
        load_labels(loaded.root / "labels.jsonl", suite)
    assert message in str(caught.value)
    assert f"{loaded.root / 'labels.jsonl'}:2" in str(caught.value)


def test_yaml_labels_with_scores_and_a_threshold(tmp_path: Path) -> None:
    config = write_project(tmp_path / "p", judge={"labels": "labels.yaml", "human_threshold": 0.7})
    (tmp_path / "p" / "labels.yaml").write_text(
        "- {id: a, message: m, reply: r, human: 0.7}\n"
        "- {id: b, message: m, reply: r, human: 0.69}\n"
        "- id: c\n  message: m\n  reply: r\n  human: [1]\n",
        encoding="utf-8",
    )
    loaded = load_config(config)
    _, suite = loaded.suite(None)
    with pytest.raises(CaseFileError) as caught:
        load_labels(loaded.root / "labels.yaml", suite)
    assert f"{loaded.root / 'labels.yaml'}:3" in str(caught.value)
    text = (tmp_path / "p" / "labels.yaml").read_text(encoding="utf-8").replace("[1]", "fail")
    (tmp_path / "p" / "labels.yaml").write_text(text, encoding="utf-8")
    a, b, c = load_labels(loaded.root / "labels.yaml", suite)
    assert (a.human, a.human_score, b.human, c.human) == (True, 0.7, False, False)


def test_a_judge_section_needs_a_judge_scorer(tmp_path: Path) -> None:
    config = write_project(tmp_path / "p")
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    data["suites"]["shop"]["scorer"] = {"kind": "exact"}
    config.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(ConfigError, match="calibrates a judge scorer"):
        load_config(config)


# --- the fake backend as a judge, and the bundled example's labelled set ---------------------


def judge_request(rubric: str, reply: str) -> Request:
    config = JudgeConfig(kind="judge", rubric=rubric, model={"backend": "fake"})
    scorer = JudgeScorer(config, Path("."), Judge())
    return scorer.request("parts", reply, {"message": "<reply>\nrefund\n</reply>"})


class Judge:
    name: ClassVar[str] = "unused"
    offline: ClassVar[bool] = True

    def complete(self, request: Request) -> Reply:  # pragma: no cover - never called
        raise AssertionError


def test_the_fake_judge_reads_the_reply_and_its_rubric() -> None:
    rules = FakeJudgeRules.model_validate(
        {
            "rules": [
                {"phrases": ["refund"], "score": 1, "reason": "offers a refund"},
                {"phrases": ["sorry"], "rubric": "apology", "score": 0.8, "reason": "apologises"},
            ],
            "default": 0.1,
        }
    )
    # The case's input (shown to the judge as JSON) mentions "refund": only the reply counts.
    assert json.loads(fake_judgement(judge_request("Be kind.", "We are sorry."), rules)) == {
        "score": 0.1,
        "reason": "no rule matched the reply",
    }
    said = json.loads(fake_judgement(judge_request("An apology passes.", "We are SORRY."), rules))
    assert said == {"score": 0.8, "reason": "apologises"}
    said = json.loads(fake_judgement(judge_request("x", "a refund </reply> at once"), rules))
    assert said["score"] == 1


def test_the_fake_judge_refuses_both_kinds_of_rules(tmp_path: Path) -> None:
    options = {"rules_file": "a.yml", "judge_rules_file": "b.yml"}
    with pytest.raises(BackendError, match="exactly one of"):
        load_options(options, tmp_path)
    (tmp_path / "b.yml").write_text("rules: [{phrases: [x], score: 2}]\n", encoding="utf-8")
    with pytest.raises(BackendError, match=r"rules\.0\.score"):
        load_options({"judge_rules_file": "b.yml"}, tmp_path)


def example_check(root: Path, cli: Callable[..., CliResult], *argv: str) -> dict[str, Any]:
    code, out, err = cli("judge", "check", "--config", str(root / "judge.yml"), "--json", *argv)
    assert code in (0, 1), err
    report: dict[str, Any] = json.loads(out)
    return report


def test_the_bundled_example_judge_meets_its_floor(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    root = copy_example(tmp_path / "shop")
    report = example_check(root, cli)
    dev, holdout = report["splits"]
    assert (dev["labels"], holdout["labels"]) == (76, 32)
    # Counted in judge-labels.jsonl: 3 replies name the category in prose (people pass them,
    # the fake judge's rules need the JSON form) and 3 name a wrong category in JSON (people
    # fail them, the rules do not read the reference); every other reply is graded alike.
    # All 3 prose replies and 2 of the wrong ones hash to dev, 1 wrong one to the holdout.
    assert dev["agreement"]["table"] == {
        "both_pass": 44,
        "judge_only": 2,
        "human_only": 3,
        "both_fail": 27,
    }
    assert holdout["agreement"]["agreement"]["hits"] == 31
    assert report["floor"] == {
        "split": "holdout",
        "n": 32,
        "min_labels": 30,
        "kappa_low": pytest.approx(holdout["agreement"]["kappa"]["low"]),
        "min_kappa": 0.6,
        "ok": True,
        "reasons": [],
    }


def gate(root: Path, cli: Callable[..., CliResult]) -> dict[str, Any]:
    config = str(root / "judge.yml")
    argv = ("--config", config, "--baseline", "latest:v2", "--candidate", "v3", "--json")
    code, out, err = cli("gate", *argv)
    assert code in (0, 1), err  # gate.inconclusive_exit is 0 by default
    verdict: dict[str, Any] = json.loads(out)
    return verdict


def test_the_gate_is_inconclusive_until_the_judge_is_checked_and_above_its_floor(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    root = copy_example(tmp_path / "shop")
    config = root / "judge.yml"
    code, _, err = cli("run", "v2", "--config", str(config))
    assert code == 0, err
    verdict = gate(root, cli)
    assert verdict["kind"] == "inconclusive"
    assert verdict["reasons"][0].startswith(
        "the judge has not been checked against its human labels"
    )
    example_check(root, cli)
    # Checked, of this judge and these labels, above the floor: the comparison decides alone.
    verdict = gate(root, cli)
    assert not any(r.startswith("the judge") for r in verdict["reasons"])
    assert not any(w.startswith("the comparison alone says") for w in verdict["warnings"])
    # An edited rubric is a new judge: the saved check no longer speaks for it.
    rubric = root / "judge-rubric.txt"
    rubric.write_text(rubric.read_text(encoding="utf-8") + "Be strict.\n", encoding="utf-8")
    verdict = gate(root, cli)
    assert verdict["kind"] == "inconclusive"
    assert verdict["reasons"][0].startswith("the judge changed since it was last checked")
    # ... and the baseline, graded by the old rubric, is no longer comparable either.
    assert any("scored differently" in r for r in verdict["reasons"])
    # Checked again but below a stricter floor: the verdict is inconclusive with the reason.
    config.write_text(
        config.read_text(encoding="utf-8").replace("min_kappa: 0.6", "min_kappa: 0.95"),
        encoding="utf-8",
    )
    assert cli("judge", "check", "--config", str(config))[0] == 1
    verdict = gate(root, cli)
    assert verdict["kind"] == "inconclusive"
    assert "judge.min_kappa = 0.95" in verdict["reasons"][0]
    assert any("scored differently" in r for r in verdict["reasons"][1:])


def test_a_runs_accuracy_corrected_for_the_judges_errors(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    root = copy_example(tmp_path / "shop")
    code, _, err = cli("run", "v1", "--config", str(root / "judge.yml"))
    assert code == 0, err
    (path,) = (root / ".evalgate" / "runs").glob("*.json")
    # Read as every command reads a run file (the compact form leaves default fields out).
    dev = [c for c in read_run(path).cases if c.split == "dev"]
    passed = sum(1 for c in dev if c.outcomes[0].score >= 0.5)
    report = example_check(root, cli, "--run", "latest:v1")
    corrected = report["corrected"]["corrected"]
    table = report["splits"][1]["agreement"]["table"]  # the floor's split: the holdout
    se_ = table["both_pass"] / (table["both_pass"] + table["human_only"])
    sp = table["both_fail"] / (table["both_fail"] + table["judge_only"])
    p = passed / len(dev)
    assert corrected["raw"] == pytest.approx(p)
    assert (corrected["sensitivity"], corrected["specificity"]) == pytest.approx((se_, sp))
    # Rogan-Gladen, clipped to [0, 1]: (p + Sp - 1) / (Se + Sp - 1).
    assert corrected["value"] == pytest.approx(min(1.0, max(0.0, (p + sp - 1) / (se_ + sp - 1))))
    assert corrected["low"] <= corrected["value"] <= corrected["high"]
    code, out, _ = cli("judge", "check", "--config", str(root / "judge.yml"), "--run", "latest:v1")
    assert "Corrected accuracy of " in out and "(Rogan-Gladen)" in out


def test_the_judge_docs_show_what_judge_check_prints(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "judge.md").read_text(encoding="utf-8")
    command = "$ evalgate judge check --config judge.yml --show 3\n"
    shown = readme.split(command, 1)[1].split("\n```", 1)[0]
    root = copy_example(tmp_path / "shop")
    code, out, err = cli("judge", "check", "--config", str(root / "judge.yml"), "--show", "3")
    assert code == 0
    assert out.rstrip("\n") == shown
    assert "(1 read of these labels)" in err


def test_doctor_checks_the_judge_labels(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    root = copy_example(tmp_path / "shop")
    code, out, _ = cli("doctor", "--dir", str(root), "--config", "judge.yml", "--json")
    findings = {f["check"]: f for f in json.loads(out)["findings"]}
    found = findings["suite bike-shop-judged: judge labels"]
    assert found == {
        "status": "ok",
        "check": "suite bike-shop-judged: judge labels",
        "message": "108 labels: dev 76, holdout 32",
        "fix": None,
    }
    config = root / "judge.yml"
    config.write_text(
        config.read_text(encoding="utf-8").replace("min_labels: 30", "min_labels: 50"),
        encoding="utf-8",
    )
    code, out, _ = cli("doctor", "--dir", str(root), "--config", "judge.yml", "--json")
    findings = {f["check"]: f for f in json.loads(out)["findings"]}
    found = findings["suite bike-shop-judged: judge labels"]
    assert found["status"] == "warn" and "the floor needs 50 holdout labels" in found["message"]
    (root / "judge-labels.jsonl").write_text('{"id": "x"}\n', encoding="utf-8")
    code, out, _ = cli("doctor", "--dir", str(root), "--config", "judge.yml", "--json")
    assert code == 1
    findings = {f["check"]: f for f in json.loads(out)["findings"]}
    found = findings["suite bike-shop-judged: judge labels"]
    assert found["status"] == "FAIL" and "missing reply field 'reply'" in found["message"]


def test_a_judge_that_always_fails_leaves_nothing_to_trust(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    rows = label_rows("dev", 1, 0, 0, 1, "d") + label_rows("holdout", 1, 0, 0, 1, "h")
    config = write_project(tmp_path / "p", rows=rows)
    (tmp_path / "p" / "judge.py").write_text("import sys\nsys.exit(3)\n", encoding="utf-8")
    code, out, err = cli("judge", "check", "--config", str(config), "--json")
    assert code == 1, err
    report = json.loads(out)
    assert [s["errored"] for s in report["splits"]] == [2, 2]
    assert report["floor"]["reasons"] == [
        "no holdout label could be graded (every judge call failed or was unreadable): see the "
        "errors above"
    ]
    assert any("2 dev labels errored" in w for w in report["warnings"])
