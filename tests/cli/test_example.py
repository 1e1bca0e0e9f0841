"""The bundled bike-shop example: enough cases to mean something, prompts that differ the way
the README says, and fake runs whose accuracy is what the keyword rules imply."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import EXAMPLE

from evalgate.cli.demo import bundled_example
from evalgate.runs.schema import Run

CATEGORIES = ["booking", "status", "quote", "parts", "complaint", "other"]


def records() -> list[dict[str, Any]]:
    lines = (EXAMPLE / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def prompt(version: str) -> str:
    return (EXAMPLE / "prompts" / f"{version}.txt").read_text(encoding="utf-8")


def normalise(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.casefold()))


def test_there_are_enough_cases_in_every_category() -> None:
    cases = records()
    assert len(cases) >= 180
    per_category = Counter(c["category"] for c in cases)
    assert sorted(per_category) == sorted(CATEGORIES)
    assert min(per_category.values()) >= 30, per_category
    assert len({c["id"] for c in cases}) == len(cases)


def test_groups_are_many_and_each_is_one_category() -> None:
    categories_of: dict[str, set[str]] = defaultdict(set)
    for case in records():
        categories_of[case["group"]].add(case["category"])
    assert len(categories_of) >= 60
    mixed = {g: c for g, c in categories_of.items() if len(c) > 1}
    assert mixed == {}


@pytest.mark.parametrize(
    "side",
    [
        # Three readings of "a 30% holdout by sha256 of the group": each keeps 50 cases out.
        lambda g: int(hashlib.sha256(g.encode()).hexdigest(), 16) % 100 < 30,
        lambda g: int(hashlib.sha256(g.encode()).hexdigest()[:8], 16) / 16**8 < 0.30,
        lambda g: (
            int.from_bytes(hashlib.sha256(f"evalgate\0{g}".encode()).digest()[:8], "big") / 2**64
            < 0.30
        ),
    ],
    ids=["mod-100", "prefix", "salted-prefix"],
)
def test_a_30_percent_holdout_by_group_keeps_at_least_50_cases(
    side: Callable[[str], bool],
) -> None:
    cases = records()
    held = [c for c in cases if side(c["group"])]
    assert len(held) >= 50
    assert len(cases) - len(held) >= 100


def test_no_few_shot_example_in_v3_is_a_case() -> None:
    examples = re.findall(r"^Message: (.+)$", prompt("v3"), re.MULTILINE)
    assert len(examples) >= 3
    messages = {normalise(c["message"]) for c in records()}
    leaked = [e for e in examples if normalise(e) in messages]
    assert leaked == []


def names(text: str, word: str) -> bool:
    return re.search(rf"\b{word}\b", text, re.IGNORECASE) is not None


def test_v1_names_no_category_and_asks_for_no_json() -> None:
    text = prompt("v1")
    assert [c for c in CATEGORIES if names(text, c)] == []
    assert "JSON" not in text


@pytest.mark.parametrize("version", ["v2", "v3"])
def test_v2_and_v3_name_every_category_and_ask_for_json(version: str) -> None:
    text = prompt(version)
    assert [c for c in CATEGORIES if not names(text, c)] == []
    assert "JSON" in text


def test_the_bundled_example_is_this_example() -> None:
    bundled = bundled_example()
    files = ["evalgate.yml", "cases.jsonl", "fake-rules.yml"]
    files += ["judge.yml", "judge-labels.jsonl", "judge-rules.yml", "judge-rubric.txt"]
    files += [f"prompts/{p.name}" for p in (EXAMPLE / "prompts").iterdir()]
    for name in files:
        assert (bundled / name).read_bytes() == (EXAMPLE / name).read_bytes(), name


# ------------------------------------------------------------------------------------------
# The fake's accuracy, from an independent reading of the keyword rules
# ------------------------------------------------------------------------------------------


RULES = yaml.safe_load((EXAMPLE / "fake-rules.yml").read_text(encoding="utf-8"))


def oracle(message: str, *, aliases: bool, rules: dict[str, Any] = RULES) -> str:
    """What the rules say: the first rule with a phrase in the message (case-insensitive
    substring), else the default; in the rule's own words when the prompt names no label."""
    text = message.lower()
    for rule in rules["rules"]:
        if any(phrase.lower() in text for phrase in rule["phrases"]):
            return (rule.get("alias") or rule["label"]) if aliases else rule["label"]
    return (rules.get("default_alias") or rules["default"]) if aliases else rules["default"]


@pytest.mark.parametrize(("version", "aliases"), [("v1", True), ("v2", False), ("v3", False)])
def test_a_fake_run_scores_what_the_rules_imply(
    example_run: Callable[[str], Run], version: str, aliases: bool
) -> None:
    run = example_run(version)
    by_id = {c["id"]: c for c in records()}
    implied = {c.id: oracle(by_id[c.id]["message"], aliases=aliases) for c in run.cases}
    right = sum(1 for c in run.cases if implied[c.id] == by_id[c.id]["category"])
    assert [c.answer for c in run.cases] == [implied[c.id] for c in run.cases]
    assert sum(1 for c in run.cases if c.passed) == right
    assert run.errors == 0
    if version == "v1":
        # No category named: every answer is an alias, and no alias is a category.
        assert right == 0
    else:
        # The rules are imperfect on purpose, but far better than nothing.
        assert 0.6 * len(run.cases) < right < len(run.cases)


def test_a_fake_run_answers_in_json_only_when_asked(example_run: Callable[[str], Run]) -> None:
    assert all(c.format_ok is False for c in example_run("v1").cases)
    assert all(c.format_ok is True for c in example_run("v2").cases)


def test_a_fake_run_leaves_the_holdout_out(example_run: Callable[[str], Run]) -> None:
    run = example_run("v2")
    assert {c.split for c in run.cases} <= {"dev", "regression"}
    assert 0 < len(run.cases) < len(records())


def test_the_example_config_points_at_its_files() -> None:
    config = yaml.safe_load((EXAMPLE / "evalgate.yml").read_text(encoding="utf-8"))
    suite = config["suites"]["bike-shop"]
    assert sorted(p.name for p in Path(EXAMPLE).glob(suite["prompts"])) == [
        "v1.txt",
        "v2.txt",
        "v3.txt",
    ]
    assert (EXAMPLE / suite["model"]["options"]["rules_file"]).is_file()
