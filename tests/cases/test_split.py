"""Dev / holdout / regression assignment and the leak checks (evalgate/cases/split.py, `evalgate split`).

Known answers are worked out by hand in the comments; hash positions were computed outside
evalgate with ``int.from_bytes(hashlib.sha256(b"<salt>\\0<key>").digest()[:8], "big") / 2**64``.
"""

from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CliResult

from evalgate.cases.holdout import keygen
from evalgate.cases.read import Case, parse_case
from evalgate.cases.split import (
    assign,
    assign_all,
    check_split,
    group_key,
    hashed_side,
    near_duplicates,
    normalise,
)
from evalgate.config.load import load_config
from evalgate.config.models import Fields, SplitPolicy
from evalgate.errors import ConfigError
from evalgate.running.suite import load_suite_cases

MESSAGE_ONLY = Fields(input=["message"])
# min_holdout=0 keeps the small-holdout warning out of tests about something else.
POLICY = SplitPolicy(min_holdout=0)


def make(
    id: str,
    message: str = "",
    *,
    group: str | None = None,
    category: str | None = "parts",
    split: str | None = None,
    fields: Fields = MESSAGE_ONLY,
    **extra: Any,
) -> Case:
    """A case parsed from a record, as a case file would give it."""
    record: dict[str, Any] = {"id": id, "message": message or f"message of {id}", **extra}
    for key, value in (("group", group), ("category", category), ("split", split)):
        if value is not None:
            record[key] = value
    return parse_case(record, fields, f"cases.jsonl:{id}", need_expected=False)


def kinds(cases: list[Case], policy: SplitPolicy = POLICY, **kw: Any) -> dict[str, list[str]]:
    """Findings with the ids that only the key's holder sees (``reveal``)."""
    return {f.kind: f.ids for f in check_split(cases, policy, reveal=True, **kw).findings}


def test_leak_findings_name_no_case_unless_revealed() -> None:
    dev = make("d1", "Where is my order 66?", split="dev", group="g1")
    held = make("h1", "where is my ORDER 66", split="holdout", group="g2")
    same_group = make("h2", "something else entirely here", split="holdout", group="g1")
    report = check_split([dev, held, same_group], POLICY)
    assert {f.kind for f in report.leaks} == {"identical_input", "group_on_both_sides"}
    # Counted, never named: neither the holdout ids, nor the dev id or group giving them away.
    assert all(f.ids == [] for f in report.leaks)
    dumped = report.model_dump_json()
    for secret in ("h1", "h2", "d1", "g1", "order 66"):
        assert secret not in dumped.lower(), secret
    assert all("--show-holdout" in f.message for f in report.leaks)


# --- assignment ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("salt", "key", "position"),
    [
        ("evalgate", "g001", 0.419234803557076),
        ("evalgate", "g008", 0.05048546263677429),
        ("other-salt", "g001", 0.05394231727927509),
        ("other-salt", "g008", 0.8892926886565469),
    ],
)
def test_hashed_side_is_sha256_of_salt_and_key_against_the_fraction(
    salt: str, key: str, position: float
) -> None:
    # Positions computed independently (see the module docstring): the same on every machine.
    for fraction in (0.05, 0.3, 0.45, 0.9):
        policy = SplitPolicy(salt=salt, holdout_fraction=fraction)
        assert hashed_side(key, policy) == ("holdout" if position < fraction else "dev")


def test_adding_cases_never_moves_an_existing_case() -> None:
    rng = random.Random(7)
    old = [make(f"c{i}", group=f"g{i // 3}") for i in range(600)]
    before = {c.id: c.split for c in assign_all(old, POLICY)}
    # Grow the set by half with new ids and groups, mixed in among the old cases.
    grown = old + [make(f"new{i}", group=f"new-g{i // 2}") for i in range(300)]
    rng.shuffle(grown)
    after = {c.id: c.split for c in assign_all(grown, POLICY)}
    assert {k: after[k] for k in before} == before
    assert set(before.values()) == {"dev", "holdout"}  # both sides are really exercised


def test_a_group_never_lands_on_two_sides() -> None:
    rng = random.Random(11)
    cases = [make(f"c{i}", group=f"g{rng.randrange(200)}") for i in range(1000)]
    sides: dict[str, set[str | None]] = defaultdict(set)
    for case in assign_all(cases, POLICY):
        sides[case.group or ""].add(case.split)
    assert all(len(s) == 1 for s in sides.values())
    report = check_split(cases, POLICY)
    assert report.groups["both"] == 0
    assert report.groups["dev"] + report.groups["holdout"] == len(sides)


@pytest.mark.parametrize("fraction", [0.3, 0.1, 0.5])
def test_holdout_fraction_over_10000_groups_is_binomial(fraction: float) -> None:
    n = 10_000
    policy = SplitPolicy(holdout_fraction=fraction)
    held = sum(hashed_side(f"scenario-{i}", policy) == "holdout" for i in range(n))
    # Bin(n, f): mean n*f, sd sqrt(n f (1-f)); 0.3 -> 3000 ± 45.8. Four sd is a 1-in-15,000 miss.
    sd = math.sqrt(n * fraction * (1 - fraction))
    assert abs(held - n * fraction) < 4 * sd


def test_a_zero_fraction_sends_everything_to_dev() -> None:
    policy = SplitPolicy(holdout_fraction=0.0)
    assert {hashed_side(f"k{i}", policy) for i in range(1000)} == {"dev"}


def test_an_explicit_split_wins_over_the_hash() -> None:
    # g008 hashes to 0.0505 (holdout at 0.3), g001 to 0.419 (dev).
    assert assign(make("a", group="g008"), POLICY) == "holdout"
    assert assign(make("b", group="g001"), POLICY) == "dev"
    assert assign(make("a", group="g008", split="dev"), POLICY) == "dev"
    assert assign(make("b", group="g001", split="holdout"), POLICY) == "holdout"
    assert assign(make("c", group="g001", split="regression"), POLICY) == "regression"
    written = make("d", group="g008", split="dev")
    assert assign_all([written], POLICY)[0] is written  # kept as it is


def test_the_group_key_falls_back_to_the_id() -> None:
    assert group_key(make("a", group="g1"), POLICY) == "g1"
    assert group_key(make("a"), POLICY) == "a"


def test_group_field_groups_by_another_field() -> None:
    every_field = Fields()  # input = the whole record, so `customer` is visible
    policy = SplitPolicy(group_field="customer", min_holdout=0)
    cases = [
        make(f"c{i}", group=f"own-{i}", customer=f"cust-{i % 40}", fields=every_field)
        for i in range(400)
    ]
    assert group_key(cases[0], policy) == "cust-0"
    sides: dict[str, set[str | None]] = defaultdict(set)
    for case in assign_all(cases, policy):
        sides[case.input["customer"]].add(case.split)
    assert len(sides) == 40 and all(len(s) == 1 for s in sides.values())
    # Without the field, the group (then the id) is the key.
    assert group_key(make("x", group="g7", fields=every_field), policy) == "g7"
    assert group_key(make("y", fields=every_field), policy) == "y"


def test_group_field_outside_the_input_fields_is_a_config_error(bike_shop: Path) -> None:
    # The example maps input: [message]; a case keeps only its input fields, so grouping by
    # `customer` would silently fall back to the case id.
    config = bike_shop / "evalgate.yml"
    data = yaml.safe_load(config.read_text())
    data["suites"]["bike-shop"]["split"]["group_field"] = "customer"
    config.write_text(yaml.safe_dump(data))
    loaded = load_config(config)
    _, suite = loaded.suite(None)
    with pytest.raises(ConfigError, match=r"group_field 'customer' is not one of fields\.input"):
        load_suite_cases(loaded, suite)


# --- leak checks -----------------------------------------------------------------------------


def test_identical_after_normalisation_is_a_leak() -> None:
    # Case, punctuation and whitespace differ; both normalise to "where s my bike it was due friday".
    dev = make("d1", "Where's my bike?  It was due Friday!", split="dev")
    held = make("h1", "where's my BIKE,\tit was due friday", split="holdout")
    assert normalise(dev.input["message"]) == "where s my bike it was due friday"
    assert normalise(held.input["message"]) == normalise(dev.input["message"])
    found = kinds([dev, held])
    assert found == {"identical_input": ["d1=h1"]}  # and not reported again as a near-duplicate
    assert check_split([dev, held], POLICY).leaks


def test_identical_inputs_are_found_when_every_field_is_input() -> None:
    # fields.input unset (the default): the case's input is the whole record, id and label
    # included; those must not make two identical messages look different.
    every_field = Fields()
    dev = make("d1", "Where is my bike?", split="dev", fields=every_field)
    held = make("h1", "where is my bike", split="holdout", fields=every_field)
    assert kinds([dev, held], fields=every_field) == {"identical_input": ["d1=h1"]}


def test_conversations_that_differ_before_their_last_turn_are_two_cases() -> None:
    # The bundled support-agent example: the same last message after other earlier turns
    # (another order number) was a "LEAK", and `split` and `doctor` failed on it.
    agent = Fields(input=["message"], messages="history")
    earlier = [{"role": "user", "content": "order A4359"}, {"role": "assistant", "content": "ok"}]
    other = [{"role": "user", "content": "order A4396"}, {"role": "assistant", "content": "ok"}]
    dev = make("d1", "Where is it now?", split="dev", fields=agent, history=earlier)
    held = make("h1", "Where is it now?", split="holdout", fields=agent, history=other)
    assert kinds([dev, held]) == {}
    same = make("h2", "where is it now", split="holdout", fields=agent, history=earlier)
    assert kinds([dev, same]) == {"identical_input": ["d1=h2"]}


WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
]


def one_word_changed(n: int) -> tuple[str, str]:
    """Two n-word sentences of distinct words differing in one word far from either end."""
    words = WORDS[:n]
    changed = [*words]
    changed[n // 2] = "CHANGED"
    return " ".join(words), " ".join(changed)


def test_one_word_changed_in_a_long_sentence_is_a_near_duplicate() -> None:
    # 32 distinct words -> 30 three-word shingles each; the changed word sits in 3 of them, so
    # 27 are shared and the union is 30 + 3 = 33: Jaccard 27/33 = 0.818 >= 0.8.
    a, b = one_word_changed(32)
    dev, held = make("d1", a, split="dev"), make("h1", b, split="holdout")
    assert near_duplicates([dev], [held], POLICY) == [("d1", "h1", pytest.approx(27 / 33))]
    assert kinds([dev, held]) == {"near_duplicate": ["d1~h1 (0.82)"]}


def test_the_near_duplicate_threshold_comes_from_config() -> None:
    # 20 words -> 18 shingles each, 15 shared, union 21: Jaccard 15/21 = 0.714.
    a, b = one_word_changed(20)
    dev, held = make("d1", a, split="dev"), make("h1", b, split="holdout")
    assert near_duplicates([dev], [held], POLICY) == []
    assert kinds([dev, held]) == {}
    looser = SplitPolicy(near_duplicate=0.7, min_holdout=0)
    assert near_duplicates([dev], [held], looser) == [("d1", "h1", pytest.approx(15 / 21))]


def test_an_unrelated_pair_is_no_leak() -> None:
    # Shingles {can i book, i book a, book a service, a service on, service on tuesday} and
    # {my brakes squeal, brakes squeal on, squeal on every, on every descent}: none shared.
    dev = make("d1", "Can I book a service on Tuesday?", split="dev")
    held = make("h1", "My brakes squeal on every descent", split="holdout")
    assert near_duplicates([dev], [held], POLICY) == []
    assert kinds([dev, held]) == {}


def test_a_group_on_both_sides_by_explicit_splits_is_a_leak() -> None:
    cases = [
        make("a", "first message here", group="g1", split="dev"),
        make("b", "second one quite different", group="g1", split="holdout"),
        make("c", "third unrelated words", group="g2", split="holdout"),
    ]
    report = check_split(cases, POLICY, reveal=True)
    assert [(f.kind, f.ids) for f in report.leaks] == [("group_on_both_sides", ["g1"])]
    assert report.groups == {"dev": 0, "holdout": 1, "both": 1}


def test_a_holdout_under_min_holdout_is_a_warning_not_a_leak() -> None:
    policy = SplitPolicy(min_holdout=40)
    dev = [make(f"d{i}", f"dev words {i}", split="dev") for i in range(50)]
    held = [make(f"h{i}", f"holdout words {i}", split="holdout") for i in range(39)]
    report = check_split(dev + held, policy)
    assert [f.kind for f in report.findings] == ["small_holdout"]
    assert "39 cases, under 40" in report.findings[0].message
    assert report.leaks == []
    forty = [*held, make("h39", "holdout words 39", split="holdout")]
    assert check_split(dev + forty, policy).findings == []


def test_a_category_missing_from_one_side_is_reported() -> None:
    cases = [
        make("d1", "one", category="quote", split="dev"),
        make("d2", "two", category="parts", split="dev"),
        make("h1", "three", category="parts", split="holdout"),
    ]
    report = check_split(cases, POLICY)
    assert [f.kind for f in report.findings] == ["category_missing"]
    assert "category quote has no holdout cases" in report.findings[0].message
    assert report.by_category == {
        "parts": {"dev": 1, "holdout": 1, "regression": 0},
        "quote": {"dev": 1, "holdout": 0, "regression": 0},
    }


def test_counts_per_split_category_and_group_side() -> None:
    # g008 hashes to holdout, g001 to dev; regression cases count apart and have no side.
    cases = [
        make("a", "aa", group="g008", category="parts"),
        make("b", "bb", group="g008", category="quote"),
        make("c", "cc", group="g001", category="parts"),
        make("d", "dd", group="g001", category="quote"),
        make("e", "ee", group="g001", category="quote"),
        make("r", "rr", group="g9", category="parts", split="regression"),
    ]
    report = check_split(cases, POLICY)
    assert report.counts == {"dev": 3, "holdout": 2, "regression": 1}
    assert report.groups == {"dev": 1, "holdout": 1, "both": 0}
    assert report.by_category == {
        "parts": {"dev": 1, "holdout": 1, "regression": 1},
        "quote": {"dev": 2, "holdout": 1, "regression": 0},
    }
    assert report.findings == []


# --- `evalgate split` ------------------------------------------------------------------------


def split_json(cli: Callable[..., CliResult], config: Path, *extra: str) -> tuple[int, Any, str]:
    code, out, err = cli("split", "--config", str(config), "--format", "json", *extra)
    return code, json.loads(out), err


def test_split_on_the_example_passes(cli: Callable[..., CliResult], bike_shop: Path) -> None:
    config = bike_shop / "evalgate.yml"
    code, report, _ = split_json(cli, config)
    assert code == 0
    n = sum(1 for line in (bike_shop / "cases.jsonl").read_text().splitlines() if line.strip())
    assert sum(report["counts"].values()) == n
    assert report["counts"]["holdout"] >= 40
    assert [f for f in report["findings"] if f["kind"] != "category_missing"] == []
    code, text, _ = cli("split", "--config", str(config))
    assert code == 0 and "No leaks found." in text


def test_split_exits_1_on_a_planted_leak(cli: Callable[..., CliResult], bike_shop: Path) -> None:
    config = bike_shop / "evalgate.yml"
    loaded = load_config(config)
    _, suite = loaded.suite(None)
    held = next(c for c in load_suite_cases(loaded, suite).cases if c.split == "holdout")
    # The same message, shouted, forced onto the dev side under a new id and group.
    planted = {
        "id": "planted",
        "group": "planted-group",
        "category": held.category,
        "split": "dev",
        "message": held.input["message"].upper() + "!!",
    }
    with (bike_shop / "cases.jsonl").open("a") as handle:
        handle.write(json.dumps(planted) + "\n")
    code, text, _ = cli("split", "--config", str(config))
    assert code == 1
    # Counted, not named: the ids (which give the holdout case away) need the key and a flag.
    assert "LEAK:" in text and held.id not in text and "planted" not in text
    assert "--show-holdout" in text
    code, _, err = cli("split", "--config", str(config), "--show-holdout")
    assert code == 2 and "EVALGATE_HOLDOUT_KEY" in err
    # A plaintext holdout has no ciphertext a wrong key would fail to open: a freshly made key
    # is refused, without the public key keygen writes and against another one.
    fresh, _ = keygen()
    stranger = {"EVALGATE_HOLDOUT_KEY": fresh}
    code, _, err = cli("split", "--config", str(config), "--show-holdout", env=stranger)
    assert code == 2 and "has no holdout.pub to check EVALGATE_HOLDOUT_KEY against" in err
    # The fix names commands that exist (there is no `holdout seal`).
    assert "`evalgate holdout keygen`" in err and "`evalgate holdout add`" in err
    assert "holdout seal" not in err
    code, out, _ = cli("holdout", "keygen", "--config", str(config))
    key = {"EVALGATE_HOLDOUT_KEY": out.strip().splitlines()[-1]}
    code, text, err = cli("split", "--config", str(config), "--show-holdout", env=stranger)
    assert code == 2 and "EVALGATE_HOLDOUT_KEY is not the secret of this public key" in err
    assert held.id not in text + err
    code, text, _ = cli("split", "--config", str(config), "--show-holdout", env=key)
    assert code == 1
    assert "LEAK:" in text and f"planted={held.id}" in text
    code, text, _ = cli("split", "--config", str(config), "--json")
    assert held.id not in text and '"ids": []' in text


def test_split_apply_writes_the_assignment(cli: Callable[..., CliResult], bike_shop: Path) -> None:
    config = bike_shop / "evalgate.yml"
    cases_file = bike_shop / "cases.jsonl"
    code, before, _ = split_json(cli, config)
    assert code == 0
    loaded = load_config(config)
    _, suite = loaded.suite(None)
    assigned = {c.id: c.split for c in load_suite_cases(loaded, suite).cases}

    code, _, err = cli("split", "--config", str(config), "--apply")
    assert code == 0
    assert f"wrote the split of {len(assigned)} cases" in err
    records = [json.loads(line) for line in cases_file.read_text().splitlines() if line.strip()]
    assert {r["id"]: r["split"] for r in records} == assigned

    code, after, _ = split_json(cli, config)
    assert code == 0
    assert (after["counts"], after["by_category"]) == (before["counts"], before["by_category"])
    # Nothing left to write the second time.
    _, _, err = cli("split", "--config", str(config), "--apply")
    assert "wrote the split of 0 cases" in err


def test_split_apply_keeps_every_case_hash(cli: Callable[..., CliResult], bike_shop: Path) -> None:
    loaded = load_config(bike_shop / "evalgate.yml")
    _, suite = loaded.suite(None)
    before = {c.id: c.hash for c in load_suite_cases(loaded, suite).cases}
    code, _, _ = cli("split", "--config", str(bike_shop / "evalgate.yml"), "--apply")
    assert code == 0
    assert {c.id: c.hash for c in load_suite_cases(loaded, suite).cases} == before
