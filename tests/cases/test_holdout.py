"""The holdout's discipline (evalgate/cases/holdout.py, `evalgate holdout ...`): the sealed store,
redaction of holdout results, and the read ledger."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CliResult
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from evalgate.cases.holdout import (
    HoldoutKey,
    LedgerRecord,
    append_ledger,
    keygen,
    load_public_key,
    load_secret_key,
    open_sealed,
    read_ledger,
    reads_of,
    redact,
    redact_all,
    seal,
    unseal,
)
from evalgate.config.load import load_config
from evalgate.errors import UserError
from evalgate.running.suite import load_suite_cases
from evalgate.runs.schema import CaseResult

KEY = "EVALGATE_HOLDOUT_KEY"


@pytest.fixture
def sealed_shop(bike_shop: Path) -> Path:
    """The example, configured with a sealed holdout (no key made yet)."""
    config = bike_shop / "evalgate.yml"
    data = yaml.safe_load(config.read_text())
    data["suites"]["bike-shop"]["sealed_holdout"] = {
        "file": "holdout.sealed.jsonl",
        "public_key": "holdout.pub",
    }
    config.write_text(yaml.safe_dump(data))
    return bike_shop


NEW_CASES = [
    {"id": "new-1", "group": "ng1", "category": "booking", "message": "Book me in for Friday 9am"},
    {"id": "new-2", "group": "ng1", "category": "booking", "message": "Can I move it to Monday?"},
    {"id": "new-3", "group": "ng2", "category": "quote", "message": "Price for a wheel truing?"},
    {"id": "new-4", "group": "ng3", "category": "status", "message": "Is my Cube ready yet ✓?"},
]


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return path


def test_holdout_actions_answer_json(cli: Callable[..., CliResult], sealed_shop: Path) -> None:
    root = sealed_shop
    config = str(root / "evalgate.yml")
    code, out, _ = cli("holdout", "keygen", "--config", config, "--json")
    assert code == 0
    made = json.loads(out)
    assert made["secret_key"].startswith("EVALGATE-HOLDOUT-KEY-1-")
    assert made["public_key"] == (root / "holdout.pub").read_text().strip()
    assert Path(made["public_key_file"]) == root / "holdout.pub"
    new = write_jsonl(root / "new-holdout.jsonl", NEW_CASES)
    code, out, _ = cli("holdout", "add", str(new), "--config", config, "--json")
    assert code == 0 and json.loads(out)["sealed"] == 4
    code, out, _ = cli("holdout", "list", "--config", config, "--json")
    assert code == 0 and json.loads(out)["count"] == 4


def keys_and_sealed_cases(cli: Callable[..., CliResult], root: Path) -> str:
    """keygen, then `holdout add` of NEW_CASES with no secret in the environment; the secret."""
    config = str(root / "evalgate.yml")
    code, out, _ = cli("holdout", "keygen", "--config", config)
    assert code == 0
    secret = out.strip().splitlines()[-1]
    assert secret.startswith("EVALGATE-HOLDOUT-KEY-1-")
    assert (root / "holdout.pub").read_text().startswith("evalgate-holdout-pub-1 ")
    new = write_jsonl(root / "new-holdout.jsonl", NEW_CASES)
    code, out, _ = cli("holdout", "add", str(new), "--config", config)
    assert code == 0 and "sealed 4 cases" in out
    return secret


# --- sealing ---------------------------------------------------------------------------------


def test_seal_and_unseal_round_trip() -> None:
    secret_text, public_text = keygen()
    record = {"id": "h-1", "message": 'Ünïcode, quotes " and\nnewlines', "n": 3, "x": None}
    line = seal(record, load_public_key(public_text))
    assert "Ünïcode" not in line and "h-1" not in line
    assert unseal(line, load_secret_key(secret_text), "f:1") == record
    # One ephemeral key and nonce per case: the same record never seals to the same line.
    assert seal(record, load_public_key(public_text)) != line


def test_a_wrong_key_is_a_user_error_saying_what_to_do() -> None:
    _, public_text = keygen()
    other_secret, _ = keygen()
    line = seal({"id": "a"}, load_public_key(public_text))
    with pytest.raises(UserError) as caught:
        unseal(line, load_secret_key(other_secret), "holdout.sealed.jsonl:3")
    assert caught.value.where == "holdout.sealed.jsonl:3"
    assert "does not open" in caught.value.what
    assert caught.value.fix is not None and KEY in caught.value.fix


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not a key at all",
        "EVALGATE-HOLDOUT-KEY-1-",
        "EVALGATE-HOLDOUT-KEY-1-c2hvcnQ=",  # base64 of b"short"
        "EVALGATE-HOLDOUT-KEY-1-!!!!not-base64!!!!",
        "EVALGATE-HOLDOUT-KEY-1-ÿÿÿÿ",
    ],
)
def test_damaged_secret_key_text_is_a_user_error(text: str) -> None:
    with pytest.raises(UserError, match="holdout secret key"):
        load_secret_key(text)


def test_a_truncated_key_from_keygen_is_a_user_error() -> None:
    secret_text, public_text = keygen()
    with pytest.raises(UserError, match="damaged"):
        load_secret_key(secret_text[:-6])
    with pytest.raises(UserError, match="public key"):
        load_public_key(secret_text)  # the secret where the public key belongs
    with pytest.raises(UserError, match="secret key"):
        load_secret_key(public_text)


@pytest.mark.parametrize(
    "damage",
    [
        lambda box: "not json",
        lambda box: "[1, 2]",
        lambda box: json.dumps({k: v for k, v in box.items() if k != "ct"}),
        lambda box: json.dumps(box | {"epk": "AAAA"}),  # a 3-byte key
        lambda box: json.dumps(box | {"epk": "A" * 43 + "="}),  # 32 zero bytes: low order
        lambda box: json.dumps(box | {"nonce": "AAAA"}),
    ],
)
def test_a_damaged_sealed_record_is_a_user_error(damage: Callable[[dict[str, Any]], str]) -> None:
    secret_text, public_text = keygen()
    box = json.loads(seal({"id": "a"}, load_public_key(public_text)))
    with pytest.raises(UserError) as caught:
        unseal(damage(box), load_secret_key(secret_text), "holdout.sealed.jsonl:1")
    assert caught.value.where == "holdout.sealed.jsonl:1"


def test_add_needs_only_the_public_key_and_list_counts(
    cli: Callable[..., CliResult], sealed_shop: Path
) -> None:
    config = str(sealed_shop / "evalgate.yml")
    keys_and_sealed_cases(cli, sealed_shop)  # no secret in the environment for `add`
    store = (sealed_shop / "holdout.sealed.jsonl").read_text()
    assert len(store.splitlines()) == 4
    for case in NEW_CASES:
        assert case["id"] not in store and case["message"] not in store
    code, out, _ = cli("holdout", "list", "--config", config)
    assert code == 0
    assert out.startswith("4 sealed holdout cases")
    assert "booking" not in out  # without the key: the count only


def test_list_with_the_key_shows_counts_per_category(
    cli: Callable[..., CliResult], sealed_shop: Path
) -> None:
    secret = keys_and_sealed_cases(cli, sealed_shop)
    code, out, _ = cli(
        "holdout", "list", "--config", str(sealed_shop / "evalgate.yml"), env={KEY: secret}
    )
    assert code == 0
    assert out.splitlines()[1:] == ["  booking: 2", "  quote: 1", "  status: 1"]


def test_a_wrong_key_exits_2_with_one_line(
    cli: Callable[..., CliResult], sealed_shop: Path
) -> None:
    keys_and_sealed_cases(cli, sealed_shop)
    wrong, _ = keygen()
    config = str(sealed_shop / "evalgate.yml")
    for argv in (("holdout", "list"), ("release", "v2", "--no-save")):
        code, _, err = cli(*argv, "--config", config, env={KEY: wrong})
        assert code == 2, argv
        assert err.startswith("error: ") and err.count("\n") == 1
        assert "does not open" in err and KEY in err and "Traceback" not in err


def test_a_damaged_key_exits_2(cli: Callable[..., CliResult], sealed_shop: Path) -> None:
    secret = keys_and_sealed_cases(cli, sealed_shop)
    config = str(sealed_shop / "evalgate.yml")
    code, _, err = cli("release", "v2", "--config", config, env={KEY: secret[:-8]})
    assert code == 2 and "damaged" in err


def test_a_release_without_the_key_exits_2(
    cli: Callable[..., CliResult], sealed_shop: Path
) -> None:
    keys_and_sealed_cases(cli, sealed_shop)
    code, out, err = cli("release", "v2", "--config", str(sealed_shop / "evalgate.yml"))
    assert code == 2
    assert f"{KEY} is not set" in err and out == ""
    assert not (sealed_shop / ".evalgate" / "holdout-ledger.jsonl").exists()


def test_add_without_a_public_key_exits_2(cli: Callable[..., CliResult], sealed_shop: Path) -> None:
    new = write_jsonl(sealed_shop / "new.jsonl", NEW_CASES)
    code, _, err = cli("holdout", "add", str(new), "--config", str(sealed_shop / "evalgate.yml"))
    assert code == 2
    assert "holdout public key does not exist" in err and "keygen" in err


def test_a_release_with_no_sealed_file_yet_exits_2(
    cli: Callable[..., CliResult], sealed_shop: Path
) -> None:
    config = str(sealed_shop / "evalgate.yml")
    code, out, _ = cli("holdout", "keygen", "--config", config)
    secret = out.strip().splitlines()[-1]
    code, _, err = cli("release", "v2", "--config", config, env={KEY: secret})
    assert code == 2
    assert "sealed holdout file does not exist" in err and "holdout add" in err


def test_sealed_cases_join_the_holdout_only_with_the_key(
    cli: Callable[..., CliResult], sealed_shop: Path
) -> None:
    secret = keys_and_sealed_cases(cli, sealed_shop)
    loaded = load_config(sealed_shop / "evalgate.yml")
    _, suite = loaded.suite(None)
    plain = load_suite_cases(loaded, suite)
    opened = load_suite_cases(loaded, suite, holdout_secret=load_secret_key(secret))
    added = [c for c in opened.cases if c.id.startswith("new-")]
    assert len(opened.cases) == len(plain.cases) + 4
    assert {c.split for c in added} == {"holdout"}
    # `evalgate split` counts the sealed cases where the key is, and says so where it is not.
    config = str(sealed_shop / "evalgate.yml")
    code, out, err = cli("split", "--config", config, "--format", "json")
    without = json.loads(out)["counts"]["holdout"]
    assert code == 0 and "sealed holdout is left out" in err
    code, out, err = cli("split", "--config", config, "--format", "json", env={KEY: secret})
    assert json.loads(out)["counts"]["holdout"] == without + 4 and err == ""


def test_retire_moves_cases_to_a_regression_file(
    cli: Callable[..., CliResult], sealed_shop: Path
) -> None:
    secret = keys_and_sealed_cases(cli, sealed_shop)
    config = str(sealed_shop / "evalgate.yml")
    store = sealed_shop / "holdout.sealed.jsonl"
    target = sealed_shop / "regression.jsonl"
    before = store.read_text()
    retire = ("holdout", "retire", "--to", str(target), "--config", config)
    code, _, err = cli(*retire, "new-1", "nope", env={KEY: secret})
    assert code == 2 and "'nope'" in err
    assert store.read_text() == before and not target.exists()  # nothing moved

    code, out, _ = cli(*retire, "new-1", "new-3", env={KEY: secret})
    assert code == 0 and "retired 2 cases" in out
    retired = [json.loads(line) for line in target.read_text().splitlines()]
    assert retired == [
        NEW_CASES[0] | {"split": "regression"},
        NEW_CASES[2] | {"split": "regression"},
    ]
    remaining = open_sealed(store, load_secret_key(secret))
    assert [r["id"] for _, r in remaining] == ["new-2", "new-4"]
    code, out, _ = cli("holdout", "list", "--config", config)
    assert out.startswith("2 sealed holdout cases")


def test_retire_needs_the_key(cli: Callable[..., CliResult], sealed_shop: Path) -> None:
    keys_and_sealed_cases(cli, sealed_shop)
    code, _, err = cli("holdout", "retire", "new-1", "--config", str(sealed_shop / "evalgate.yml"))
    assert code == 2 and f"{KEY} is not set" in err


# --- redaction -------------------------------------------------------------------------------


def test_redact_keeps_only_hashes_groups_and_scores(make_case: Callable[..., CaseResult]) -> None:
    message = "Secret holdout message about a Brompton"
    case = make_case(
        "hold-42",
        "booking",
        ["quote", "booking"],
        message=message,
        split="holdout",
        group="g-42",
        outcome={"reason": "because hold-42 said Brompton"},
    )
    key = HoldoutKey(X25519PrivateKey.generate())
    shown = redact(case, key)
    dumped = shown.model_dump_json()
    for secret in ("hold-42", message, "Brompton", "booking", "quote", case.hash):
        assert secret not in dumped
    # The keyed group is "g-" and hex, which starts with "42" once in 256 keys: the group is
    # looked for as a whole JSON string.
    assert '"g-42"' not in dumped
    assert shown.id == key.case("hold-42", case.hash) and shown.id.startswith("h-")
    assert shown.split == "holdout"
    # No group: a keyed group, counted, gives its size away.
    assert (shown.group, shown.hash) == (None, key.content(case.hash))
    assert shown.input is None and shown.expected is None and shown.category is None
    assert [o.score for o in shown.outcomes] == [0.0, 1.0] and shown.score == 0.5
    assert all(o.text is None and o.answer is None and o.reason is None for o in shown.outcomes)
    assert [o.input_tokens for o in shown.outcomes] == [120, 120]


def test_redact_keeps_an_errors_kind_not_its_message(
    make_case: Callable[..., CaseResult],
) -> None:
    case = make_case(
        "hold-7",
        error="refused to discuss 'hold-7 secret text'",
        error_kind="refusal",
        group="g7",
    )
    shown = redact(case, HoldoutKey())
    assert shown.error == "refusal error" and "hold-7" not in shown.model_dump_json()


def test_keyed_names_differ_per_case_content_and_key_and_are_stable() -> None:
    secret = X25519PrivateKey.generate()
    key, again, other = (
        HoldoutKey(secret),
        HoldoutKey(secret),
        HoldoutKey(X25519PrivateKey.generate()),
    )
    assert key.case("a", "h1") != key.case("b", "h1") != key.case("a", "h2")
    # Stable under one key (so releases pair), different under another or without one.
    assert key.case("a", "h1") == again.case("a", "h1")
    assert len({key.case("a", "h1"), other.case("a", "h1"), HoldoutKey().case("a", "h1")}) == 3
    assert key.keyed and not HoldoutKey().keyed
    # A set digest commits to the set, not to the order it is given in.
    assert key.digest(["x", "y"]) == key.digest(["y", "x"]) != key.digest(["x"])
    assert key.verify("body", key.sign("body")) and not other.verify("body", key.sign("body"))
    assert not key.verify("body", None)


# --- ledger ----------------------------------------------------------------------------------


def ledger_record(holdout: str, score: float | None = 0.8, n: int = 50) -> LedgerRecord:
    return LedgerRecord(
        time=datetime(2025, 6, 1, tzinfo=UTC),
        git_ref="refs/tags/v1",
        git_commit="abc123",
        prompt="v2",
        prompt_sha256="p" * 64,
        holdout_sha256=holdout,
        score=score,
        n=n,
    )


def test_ledger_append_read_and_count(tmp_path: Path) -> None:
    path = tmp_path / "state" / "holdout-ledger.jsonl"
    assert read_ledger(path) == []
    assert append_ledger(path, ledger_record("A")) == 1
    assert append_ledger(path, ledger_record("B", score=None, n=0)) == 1
    assert append_ledger(path, ledger_record("A", score=0.75)) == 2
    records = read_ledger(path)
    assert [(r.holdout_sha256, r.score, r.n) for r in records] == [
        ("A", 0.8, 50),
        ("B", None, 0),
        ("A", 0.75, 50),
    ]
    assert Counter(r.holdout_sha256 for r in records) == {"A": 2, "B": 1}
    assert (reads_of(records, "A"), reads_of(records, "B"), reads_of(records, "C")) == (2, 1, 0)


@pytest.mark.parametrize("bad", ["{not json", '{"time": "2025-06-01T00:00:00Z"}', "[]"])
def test_a_corrupt_ledger_line_names_file_and_line(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "holdout-ledger.jsonl"
    append_ledger(path, ledger_record("A"))
    with path.open("a") as handle:
        handle.write("\n" + bad + "\n")  # a blank line 2 is skipped; the bad one is line 3
    with pytest.raises(UserError) as caught:
        read_ledger(path)
    assert caught.value.where == f"{path}:3"
    assert "corrupt ledger record" in caught.value.what


def test_redact_all_puts_the_holdout_last_by_keyed_name_with_even_usage(
    make_case: Callable[..., CaseResult],
) -> None:
    """File order or a case's token count would tell which keyed name is which case."""
    key = HoldoutKey(X25519PrivateKey.generate())
    cases = [
        make_case("h1", split="holdout", outcome={"input_tokens": 10, "latency_s": 1.0}),
        make_case("d1"),
        make_case("h2", split="holdout", outcome={"input_tokens": 31, "latency_s": 2.0}),
        make_case("h3", split="holdout", outcome={"input_tokens": 20, "latency_s": 3.0}),
    ]
    out = redact_all(cases, key)
    assert [c.id for c in out[:1]] == ["d1"]
    held = out[1:]
    assert [c.id for c in held] == sorted(key.case(c.id, c.hash) for c in cases if c.id != "d1")
    # 10 + 31 + 20 = 61 tokens over 3 outcomes: shares 21, 20, 20 (the total is kept exactly);
    # latency the mean, (1 + 2 + 3) / 3 = 2.
    assert [o.input_tokens for c in held for o in c.outcomes] == [21, 20, 20]
    assert {o.latency_s for c in held for o in c.outcomes} == {2.0}


def test_add_refuses_an_id_the_suite_already_has(
    cli: Callable[..., CliResult], sealed_shop: Path
) -> None:
    """A sealed case whose id is a plain case's (or, with the key, a sealed one's) would make
    the suite unreadable at every release, and a sealed line cannot be edited: refused."""
    config = str(sealed_shop / "evalgate.yml")
    secret = keys_and_sealed_cases(cli, sealed_shop)
    store = sealed_shop / "holdout.sealed.jsonl"
    before = store.read_text()
    plain = write_jsonl(
        sealed_shop / "dup.jsonl",
        [{"id": "bk-001", "group": "x", "category": "parts", "message": "again"}],
    )
    code, _, err = cli("holdout", "add", str(plain), "--config", config)
    assert code == 2 and "'bk-001' is already a case of the suite, at " in err, err
    assert "cases.jsonl:1" in err and err.count("\n") == 1
    # With the key the sealed ids are checked too; without it, the answer says they were not.
    again = write_jsonl(sealed_shop / "again.jsonl", NEW_CASES[:1])
    code, _, err = cli("holdout", "add", str(again), "--config", config, env={KEY: secret})
    assert code == 2 and "'new-1' is already a case of the suite" in err, err
    assert store.read_text() == before  # nothing was sealed
    fresh = write_jsonl(sealed_shop / "fresh.jsonl", [{**NEW_CASES[0], "id": "new-9"}])
    code, out, _ = cli("holdout", "add", str(fresh), "--config", config)
    assert code == 0 and "sealed 1 case into" in out
    assert "the ids already sealed were not checked" in out


def test_a_sealed_duplicate_says_where_the_other_is_and_what_to_do(
    cli: Callable[..., CliResult], sealed_shop: Path
) -> None:
    from evalgate.cases.holdout import load_public_key, seal

    secret = keys_and_sealed_cases(cli, sealed_shop)
    public = load_public_key((sealed_shop / "holdout.pub").read_text())
    with (sealed_shop / "holdout.sealed.jsonl").open("a") as store:
        store.write(
            seal({**NEW_CASES[0], "id": "bk-001"}, public) + "\n"
        )  # an older evalgate's add
    code, _, err = cli(
        "release", "v3", "--config", str(sealed_shop / "evalgate.yml"), env={KEY: secret}
    )
    assert code == 2 and "duplicate case id 'bk-001' (also at " in err, err
    assert "evalgate holdout retire bk-001 --to FILE" in err


def test_add_seals_a_file_the_suites_globs_also_match(
    cli: Callable[..., CliResult], sealed_shop: Path
) -> None:
    """The cases being sealed may sit where the suite's cases: glob finds them (to be deleted
    after, as add says): they are not taken for cases the suite already has."""
    config_path = sealed_shop / "evalgate.yml"
    data = yaml.safe_load(config_path.read_text())
    data["suites"]["bike-shop"]["cases"] = ["cases.jsonl", "more/*.jsonl"]
    config_path.write_text(yaml.safe_dump(data))
    config = str(config_path)
    code, _, _ = cli("holdout", "keygen", "--config", config)
    assert code == 0
    (sealed_shop / "more").mkdir()
    new = write_jsonl(sealed_shop / "more" / "new-holdout.jsonl", NEW_CASES)
    code, out, err = cli("holdout", "add", str(new), "--config", config)
    assert code == 0 and "sealed 4 cases" in out, err
