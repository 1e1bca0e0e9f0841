"""Holdout text in a request, by every channel a pull request has: the one guard holds.

The base commit (the GitHub stand-in's main) holds examples/bike-shop as shipped, with its
plaintext holdout. Each pull request below smuggles the base's holdout cases into what the job
sends, by a channel the copy check (base_split.py) does not read: earlier turns, a template
that swaps unchanged dev messages for holdout ones, a template that mutates its input on the
first render, ``|random``, look-alike and invisible letters, few-shot examples in the prompt
file, the judge's holdout labels in its rubric. The suite runs on the real anthropic SDK
against the Messages stand-in, which keeps every request it receives whole: not one holdout
text may be in any of them, and the job is inconclusive and failed with one line naming the
channel. An ordinary prompt edit is not flagged. At release, a shipped prompt that carries
holdout cases is contamination, and the release fails.

Each attack is data (what the pull request writes, the channel the refusal names).
"""

from __future__ import annotations

import json
import random
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import copy_example, fake_backend
from test_action import (
    FOLDER,
    HARMLESS,
    PROMPT,
    REPO,
    V3,
    Job,
    api,
    api_env,
    comments,
    gh,
    holdout_cases,
    make_workspace,
    messages,
    pr_event,
    release,
    run_action,
)
from test_agent import TOOLS
from test_agent import fake as agent_fake
from test_fork import collect as fork_collect
from test_fork import gate as fork_gate

from evalgate.backends.base import Message, Request
from evalgate.backends.guarded import guarded
from evalgate.cases.judge_labels import load_labels
from evalgate.cases.leakguard import LeakIndex, base_guards, words
from evalgate.cases.read import Case, load_cases
from evalgate.cases.split import assign_all
from evalgate.config.load import load_config
from evalgate.running.execute import execute
from evalgate.running.suite import build_jobs, load_prompt, load_suite_cases
from evalgate.scorers.base import build_scorer
from evalgate.trajectory import AgentSpec, ToolSpec
from tests.support.github_server import GitHubServer
from tests.support.messages_server import MessagesServer

__all__ = ["gh", "messages"]  # fixtures, imported to be used here

KEY = "sk-ant-test-key"
CASES = f"{FOLDER}/cases.jsonl"
RUBRIC = f"{FOLDER}/judge-rubric.txt"
ANTHROPIC = {"backend": "anthropic", "name": "claude-haiku-4-5", "max_tokens": 64}
# Look-alike letters outside the copy check's fold table, and invisible letters.
LOOKALIKE = str.maketrans("aoeiunhgs", "ɑօҽıսոհɡꜱ")
INVISIBLE = str.maketrans({"e": "e\u3164", "o": "o\u115f", "a": "a\u1160", "i": "i\uffa0"})


# --------------------------------------------------------------------------- the world


def _config(workspace: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((workspace / FOLDER / name).read_text("utf-8"))
    return data


def _write_config(workspace: Path, name: str, data: dict[str, Any]) -> None:
    (workspace / FOLDER / name).write_text(yaml.safe_dump(data, sort_keys=False), "utf-8")


def _suite(data: dict[str, Any]) -> dict[str, Any]:
    suite: dict[str, Any] = next(iter(data["suites"].values()))
    return suite


def _edit(workspace: Path, name: str, change: Callable[[dict[str, Any]], None]) -> None:
    data = _config(workspace, name)
    change(_suite(data))
    _write_config(workspace, name, data)


def _records(workspace: Path) -> list[dict[str, Any]]:
    lines = (workspace / CASES).read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _append(workspace: Path, records: list[dict[str, Any]]) -> None:
    with (workspace / CASES).open("a", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def _new_cases(hidden: list[str], **make: Callable[[str], Any]) -> list[dict[str, Any]]:
    """One new case per holdout message (neutral ids and groups, ``split: dev``)."""
    out = []
    for n, text in enumerate(hidden):
        record: dict[str, Any] = {
            "id": f"pr-{n}",
            "group": f"pr-{n}",
            "category": "other",
            "split": "dev",
            "message": "Do you sell gift cards for the shop?",
        }
        record |= {key: fn(text) for key, fn in make.items()}
        out.append(record)
    return out


def _hidden(workspace: Path) -> list[str]:
    return [m for _, m in holdout_cases(workspace)]


def _judge_hidden(workspace: Path) -> list[str]:
    """The judge's holdout labels' messages that no public case or dev label shows."""
    loaded = load_config(workspace / FOLDER / "judge.yml")
    _, suite = loaded.suite("bike-shop-judged")
    assert suite.judge is not None
    labels = load_labels(loaded.root / suite.judge.labels, suite)
    plain = load_cases(loaded.expand(suite.cases, "case file"), suite.fields, root=loaded.root)
    cases = assign_all(list(plain.cases), suite.split)
    public = {str(c.input["message"]) for c in cases if c.split != "holdout"}
    public |= {str(x.case.input["message"]) for x in labels if x.split != "holdout"}
    held = {str(x.case.input["message"]) for x in labels if x.split == "holdout"}
    return sorted(held - public)


# --------------------------------------------------------------------------- the attacks


def earlier_turns(workspace: Path) -> list[str]:
    """New cases whose earlier turns (``messages``) are holdout messages."""
    hidden = _hidden(workspace)
    _append(
        workspace,
        _new_cases(
            hidden,
            messages=lambda m: [
                {"role": "user", "content": m},
                {"role": "assistant", "content": '{"category": "other"}'},
            ],
        ),
    )
    return []


def swapping_template(workspace: Path) -> list[str]:
    """A template that answers unchanged dev messages with holdout messages."""
    hidden = _hidden(workspace)
    dev = [r["message"] for r in _records(workspace) if r["message"] not in set(hidden)]
    pairs = ", ".join(
        f"{json.dumps(d)}: {json.dumps(h)}" for d, h in zip(dev, hidden, strict=False)
    )
    template = (
        f"{{% set swap = {{{pairs}}} %}}<message>\n"
        "{{ swap[message] if message in swap else message }}\n</message>\n"
    )
    _edit(workspace, "evalgate.yml", lambda s: s.update(template=template))
    return []


def mutating_template(workspace: Path) -> list[str]:
    """A template that pops a list field on its first render: the copy check sees the harmless
    last item, the run the holdout message left behind."""
    _append(
        workspace,
        _new_cases(_hidden(workspace), message=lambda m: [m, "Do you sell gift cards?"]),
    )
    template = (
        "<message>\n{% if message is string %}{{ message }}"
        "{% elif message|length > 1 %}{{ message.pop() }}{% else %}{{ message[0] }}{% endif %}"
        "\n</message>\n"
    )
    _edit(workspace, "evalgate.yml", lambda s: s.update(template=template))
    return []


def random_template(workspace: Path) -> list[str]:
    """``|random`` between a harmless text and a holdout message: each render differs."""
    _append(
        workspace,
        _new_cases(_hidden(workspace), message=lambda m: [m, "Do you sell gift cards?"]),
    )
    template = (
        "<message>\n{% if message is string %}{{ message }}{% else %}{{ message|random }}"
        "{% endif %}\n</message>\n"
    )
    _edit(workspace, "evalgate.yml", lambda s: s.update(template=template))
    return []


def disguised(table: dict[int, str]) -> Callable[[Path], list[str]]:
    def attack(workspace: Path) -> list[str]:
        planted = [m.translate(table) for m in _hidden(workspace)]
        _append(
            workspace,
            [r | {"message": p} for r, p in zip(_new_cases(planted), planted, strict=True)],
        )
        return planted

    return attack


def few_shot_prompt(workspace: Path) -> list[str]:
    """Every holdout case pasted into the prompt file as a few-shot example."""
    shots = "".join(
        f"\nMessage: {r['message']}\nReply: {json.dumps({'category': r['category']})}\n"
        for r in _records(workspace)
        if r["message"] in set(_hidden(workspace))
    )
    (workspace / PROMPT).write_text(V3 + shots, encoding="utf-8")
    return []


def judge_labels_in_rubric(workspace: Path) -> list[str]:
    """The judge's holdout labels pasted into the rubric (its replies and human verdicts)."""
    loaded = load_config(workspace / FOLDER / "judge.yml")
    _, suite = loaded.suite("bike-shop-judged")
    assert suite.judge is not None
    labels = load_labels(loaded.root / suite.judge.labels, suite)
    shots = "".join(
        f"\nMessage: {x.case.input['message']}\nReply: {x.reply}\nGrade: {x.human}\n"
        for x in labels
        if x.split == "holdout"
    )
    rubric = workspace / RUBRIC
    rubric.write_text(rubric.read_text("utf-8") + "\nGraded examples:\n" + shots, "utf-8")

    def judged(s: dict[str, Any]) -> None:
        s["model"] = dict(ANTHROPIC)
        s["scorer"]["model"] = dict(ANTHROPIC, max_tokens=200)

    _edit(workspace, "judge.yml", judged)
    return []


def harmless_edit(workspace: Path) -> list[str]:
    """An ordinary prompt edit: one more instruction."""
    (workspace / PROMPT).write_text(HARMLESS, encoding="utf-8")
    return []


@dataclass(frozen=True)
class Leak:
    """One channel: what the pull request writes, what the refusal must name."""

    id: str
    attack: Callable[[Path], list[str]]
    # Words of the one line that names the channel.
    channel: str
    config: str = "evalgate.yml"
    # The files the pull request changes (relative to the example's folder).
    changes: tuple[str, ...] = ("evalgate.yml", "cases.jsonl")
    # True when another defence may stop the attack first (template purity: renders from
    # deep copies, no ``random`` in pull-request jobs): then the job may refuse the template
    # or the attack may change nothing, but no holdout text is ever sent.
    disarmable: bool = False
    hidden: Callable[[Path], list[str]] = field(default=_hidden)


LEAKS = [
    Leak("earlier-turns", earlier_turns, r"earlier turns of case pr-\d+ carry a holdout case"),
    Leak(
        "template-swaps-dev-messages",
        swapping_template,
        r"the user turn of case bk-\d+ carries a holdout case",
        changes=("evalgate.yml",),
    ),
    Leak(
        "template-mutates-on-first-render",
        mutating_template,
        r"the user turn of case pr-\d+ carries a holdout case",
        disarmable=True,
    ),
    Leak(
        "template-random",
        random_template,
        r"the user turn of case pr-\d+ carries a holdout case",
        disarmable=True,
    ),
    Leak(
        "look-alike-letters",
        disguised(LOOKALIKE),
        r"the user turn of case pr-\d+ carries a holdout case",
        changes=("cases.jsonl",),
    ),
    Leak(
        "invisible-letters",
        disguised(INVISIBLE),
        r"the user turn of case pr-\d+ carries a holdout case",
        changes=("cases.jsonl",),
    ),
    Leak(
        "few-shot-in-prompt-file",
        few_shot_prompt,
        r"the system prompt carries a holdout case",
        changes=("evalgate.yml", "prompts/v3.txt"),
    ),
    Leak(
        "judge-labels-in-rubric",
        judge_labels_in_rubric,
        r"a request to the judge \(its rubric, a case or a reply\) carries a holdout case",
        config="judge.yml",
        changes=("judge.yml", "judge-rubric.txt"),
        hidden=_judge_hidden,
    ),
]


def _use_anthropic(workspace: Path, config: str) -> None:
    _edit(workspace, config, lambda s: s.update(model=dict(ANTHROPIC)))


def _pr(
    tmp_path: Path, gh: GitHubServer, messages: MessagesServer, leak: Leak, number: int = 7
) -> tuple[Job, list[str]]:
    workspace = make_workspace(tmp_path)
    _use_anthropic(workspace, leak.config)
    planted = leak.attack(workspace)
    changed = {
        f"{FOLDER}/{p}": (workspace / FOLDER / p).read_text("utf-8")
        for p in {*leak.changes, leak.config}
    }
    gh.create_branch(REPO, f"feature-{number}")
    gh.add_commit(REPO, changed, branch=f"feature-{number}")
    gh.add_pull(REPO, head=f"feature-{number}", number=number)
    event = pr_event(number)
    event["pull_request"]["base"]["sha"] = gh.branch_sha(REPO, "main")
    job = run_action(
        workspace,
        "pull_request",
        event,
        ref=f"refs/pull/{number}/merge",
        inputs=api(gh) | {"anthropic_api_key": KEY, "config": leak.config},
        env=api_env(gh) | {"ANTHROPIC_BASE_URL": messages.url},
    )
    return job, planted


def _bodies(messages: MessagesServer) -> list[str]:
    """Every request the stand-in received, whole (token counts too)."""
    return [json.dumps(ex.body, ensure_ascii=False) for ex in messages.requests]


def _leaked(bodies: list[str], texts: list[str]) -> list[str]:
    return [t for t in texts for body in bodies if json.dumps(t, ensure_ascii=False)[1:-1] in body]


@pytest.mark.parametrize("leak", LEAKS, ids=[x.id for x in LEAKS])
def test_holdout_text_by_any_channel_is_never_sent(
    tmp_path: Path, gh: GitHubServer, messages: MessagesServer, leak: Leak
) -> None:
    hidden = leak.hidden(make_workspace(tmp_path / "base"))
    assert len(hidden) >= 9
    job, planted = _pr(tmp_path / "pr", gh, messages, leak)

    # Not one holdout text, as written or as planted in disguise, in any request received.
    assert _leaked(_bodies(messages), hidden + planted) == []
    public = "\n".join([job.summary, job.out, job.err, *comments(gh)])
    for text in hidden:
        assert text not in public
    line = re.search(leak.channel, job.out)
    if leak.disarmable and line is None:
        # Stopped by another defence (the template refused, or rendered purely): still safe.
        assert "carries a holdout case" not in job.out, job.out
        return
    # One line names the channel; the job is inconclusive and failed.
    assert line is not None, job.out + job.err
    [error] = [a for a in job.annotations("error") if re.search(leak.channel, a)]
    assert "it was not sent, nor anything after it" in error
    assert job.outputs["verdict"] in ("inconclusive", "fail")
    assert job.code == 1
    # The comment says so too (as Markdown, its punctuation escaped).
    shown = [re.sub(r"\\(.)", r"\1", c) for c in comments(gh)]
    assert any(re.search(leak.channel, c) for c in shown), shown


def test_what_was_scored_before_a_refusal_is_kept(tmp_path: Path) -> None:
    """The fourth request carries a holdout message: the three before it stay scored, it and
    every later one come back as not sent (errors, never wrong answers)."""
    root = copy_example(tmp_path / "shop")
    loaded = load_config(root / "evalgate.yml")
    _, suite = loaded.suite(None)
    cases = load_suite_cases(loaded, suite).cases
    held = [c for c in cases if c.split == "holdout"]
    public = [c for c in cases if c.split != "holdout"]
    jobs = list(build_jobs(suite, load_prompt(loaded, suite, "v3"), public[:6], 1))
    smuggled = Message(role="user", content=f"<message>\n{held[0].input['message']}\n</message>")
    jobs[3] = replace(jobs[3], request=jobs[3].request.model_copy(update={"messages": (smuggled,)}))
    backend = guarded(
        fake_backend({"rules_file": "fake-rules.yml"}, root), base_guards(held, public).runs
    )
    outcomes, _ = execute(jobs, backend, build_scorer(suite.scorer, root), concurrency=1)
    assert all(o.error is None and o.score is not None for o in outcomes[:3])
    assert [o.error_kind for o in outcomes[3:]] == ["holdout"] * 3
    assert (
        outcomes[3].error
        == f"not sent: the user turn of case {public[3].id} carries a holdout case"
    )
    assert all("the job stopped sending" in str(o.error) for o in outcomes[4:])


def test_an_ordinary_prompt_edit_is_not_flagged(
    tmp_path: Path, gh: GitHubServer, messages: MessagesServer
) -> None:
    benign = Leak("benign", harmless_edit, "", changes=("prompts/v3.txt",))
    hidden = _hidden(make_workspace(tmp_path / "base"))
    job, _ = _pr(tmp_path / "pr", gh, messages, benign)
    bodies = _bodies(messages)
    assert len(bodies) > 40, job.out + job.err
    assert _leaked(bodies, hidden) == []
    assert "carries a holdout case" not in job.out + job.summary
    assert job.code == 0, job.out + job.err
    assert job.outputs["verdict"] != "inconclusive"


def test_a_judged_suite_with_its_labels_is_not_flagged(tmp_path: Path, gh: GitHubServer) -> None:
    """The judge check sends the base's labels by design (dev and holdout); the dev cases'
    messages are judge labels too. Neither is a leak."""
    workspace = make_workspace(tmp_path)
    (workspace / PROMPT).write_text(HARMLESS, encoding="utf-8")
    gh.create_branch(REPO, "plain")
    gh.add_commit(REPO, {f"{FOLDER}/prompts/v3.txt": HARMLESS}, branch="plain")
    gh.add_pull(REPO, head="plain", number=8)
    event = pr_event(8)
    event["pull_request"]["base"]["sha"] = gh.branch_sha(REPO, "main")
    job = run_action(
        workspace,
        "pull_request",
        event,
        ref="refs/pull/8/merge",
        inputs=api(gh) | {"config": "judge.yml"},
        env=api_env(gh),
    )
    assert "carries a holdout case" not in job.out + job.summary, job.out
    assert "agree" in job.summary  # the judge check ran, holdout labels included
    assert job.code == 0, job.out + job.err


# --------------------------------------------------------------------------- release


def test_a_release_whose_prompt_carries_holdout_cases_is_contamination(
    tmp_path: Path, gh: GitHubServer
) -> None:
    hidden = _hidden(make_workspace(tmp_path / "base"))
    pasted = V3 + "".join(f"\nMessage: {m}\nReply: (see above)\n" for m in hidden[::3])
    job = release(gh, tmp_path / "tag", "v9.0.0", prompt=pasted)
    assert job.code == 2, job.out + job.err
    [error] = job.annotations("error")
    assert "the shipped prompt v3 (prompts/v3.txt) carries holdout cases" in error
    assert "contamination" in error and "the release fails" in error
    for text in hidden:
        assert text not in job.out + job.err + job.summary
    # Refused before any call: no holdout read was recorded.
    assert gh.branch_sha(REPO, "evalgate-data") is None

    ok = release(gh, tmp_path / "ok", "v9.0.1", prompt=HARMLESS)
    assert ok.code == 0, ok.out + ok.err
    assert "contamination" not in ok.out


# --------------------------------------------------------------------------- the reader


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("ɑ օ ҽ ı ս ո հ ɡ ꜱ", "a o e i u n h g s"),
        ("Gears\u3164 are sli\u115fpping ag\u1160ain", "gears are slipping again"),
        ("ＦＵＬＬ wi\u200bdth", "full width"),
        ("re.fund my mo-ney", "refund my money"),
        ("ΗΕLLΟ НЕLLО HeIIo", "hello hello hello"),
        ("Cafe\u0301 z̴a̴p̴", "cafe zap"),
    ],
)
def test_the_guard_reads_text_as_a_reader_does(written: str, read: str) -> None:
    assert words(written) == words(read)


def test_a_shared_preamble_and_short_replies_are_no_leak() -> None:
    preamble = "Hello, I am a customer of the bike shop on the high street and I have a question."
    index = LeakIndex(
        [preamble, "Is the wheel I ordered last Monday in yet, please?", "ok thanks"],
        [preamble],
    )
    assert index.live == 2
    assert not index.carries([preamble + " Do you open on Sundays?"])
    assert index.carries(["Examples: is the wheel i ordered last monday in yet please"])
    assert not index.carries(["ok"])


def test_a_request_read_in_pieces_is_read_as_one_text() -> None:
    """The guard keeps each text's pieces (its grams in the index and its ends) and joins them:
    however a request's words fall into texts (a holdout text split across the system prompt,
    the turns and the tools, in runs of one word or in the middle of a word), the answer is
    the one reading all its words in a row gives."""
    held = [
        "Is the wheel I ordered last Monday in yet, please?",
        "ok thanks",
        "Gears are slipping again after your repair and I am disappointed with the shop.",
        "my chain keeps falling off whenever I change into the lowest gear on hills",
    ]
    index = LeakIndex(held)
    rng = random.Random(23)
    filler = [
        "we",
        "sell",
        "bikes",
        "and",
        "fix",
        "them",
        "on",
        "weekdays",
        "from",
        "nine",
        "until",
        "five",
    ]
    for _ in range(300):
        text = rng.choice(held).split()
        start = rng.randrange(len(text) // 3 + 1)
        spoken = (
            rng.sample(filler, rng.randrange(4))
            + text[start : start + rng.randrange(2, len(text) + 1)]
            + rng.sample(filler, rng.randrange(4))
        )
        line = " ".join(spoken)
        cuts = sorted(rng.sample(range(1, len(line)), min(len(line) - 1, rng.randrange(12))))
        texts = [line[a:b] for a, b in zip([0, *cuts], [*cuts, len(line)], strict=True)]
        whole = index.carried([w for t in texts for w in words(t)])
        assert index.held(index.pieces(texts)) == whole, texts
        parts = [index.pieces(texts[:1]), index.pieces(texts[1:3]), index.pieces(texts[3:])]
        assert index.held(index.join(parts)) == whole, texts


# --------------------------------------------------------------------------- agent channels

# A holdout text a tool could hand back (the tool command is the pull request's to change).
AGENT_HELD = "Gears are slipping again after your repair and I am disappointed with the shop."
TOOLS_PY = f"""
import json, sys
call = json.load(sys.stdin)
print(json.dumps({{"result": {{"status": "delivered", "note": {AGENT_HELD!r}}}}}))
"""


def _agent(tmp_path: Path, **spec: Any) -> Request:
    (tmp_path / "tools.py").write_text(TOOLS_PY, encoding="utf-8")
    tools = spec.pop("tools", TOOLS)
    return Request(
        system="Always look up the order.",
        messages=(Message(role="user", content="refund A1 please"),),
        model="fake-agent",
        case={"id": "c1"},
        agent=AgentSpec(tools=tools, **spec),
    )


AGENT_LEAKS = [
    (
        "tool-results",
        {"tool_command": (sys.executable, "tools.py")},
        "not sent: tool results of case c1 carry a holdout case",
    ),
    (
        "fixtures",
        {"fixtures": {"lookup_order": [{"result": {"status": "delivered", "note": AGENT_HELD}}]}},
        "not sent: the fixtures of case c1 carry a holdout case",
    ),
    (
        "tool-definitions",
        {"tools": (*TOOLS[1:], ToolSpec(name="lookup_order", description=AGENT_HELD))},
        "not sent: the tool definitions carry a holdout case",
    ),
]


@pytest.mark.parametrize(
    ("spec", "refusal"), [a[1:] for a in AGENT_LEAKS], ids=[a[0] for a in AGENT_LEAKS]
)
def test_an_agent_loop_sends_no_holdout_text_on(
    tmp_path: Path, spec: dict[str, Any], refusal: str
) -> None:
    guard = base_guards([_held_case(AGENT_HELD)], []).runs
    backend = guarded(agent_fake(tmp_path), guard)
    reply = backend.complete(_agent(tmp_path, **spec))
    assert (reply.error_kind, reply.error) == ("holdout", refusal)
    # The tool's result never went back to the model: no step after the one that called it.
    assert len(reply.steps or []) <= 1
    assert guard.tripped is not None
    # And nothing else of the job is sent after it.
    after = backend.complete(_agent(tmp_path))
    assert after.error_kind == "holdout" and "the job stopped sending" in str(after.error)


def _held_case(text: str) -> Case:
    return Case(id="h1", input={"message": text}, hash="0" * 64, source="cases.jsonl:1")


# --------------------------------------------------------------------------- forks

# What a fork's data may carry: the suite's prompts and cases (the overlay refuses the rest).
FORK_LEAKS = [
    x
    for x in LEAKS
    if x.id
    in ("earlier-turns", "look-alike-letters", "invisible-letters", "few-shot-in-prompt-file")
]


@pytest.mark.parametrize("leak", FORK_LEAKS, ids=[x.id for x in FORK_LEAKS])
def test_a_fork_pull_request_sends_no_holdout_text_either(
    tmp_path: Path, gh: GitHubServer, messages: MessagesServer, leak: Leak
) -> None:
    peek = make_workspace(tmp_path / "peek")
    hidden = _hidden(peek)
    before = {p: (peek / p).read_text("utf-8") for p in (CASES, PROMPT)}
    planted = leak.attack(peek)
    files = {p: (peek / p).read_text("utf-8") for p in before}
    _, data = fork_collect(tmp_path, gh, {p: t for p, t in files.items() if t != before[p]})
    job = fork_gate(
        tmp_path,
        gh,
        data,
        anthropic=True,
        inputs={"anthropic_api_key": KEY},
        env={"ANTHROPIC_BASE_URL": messages.url},
    )
    assert _leaked(_bodies(messages), hidden + planted) == []
    assert re.search(leak.channel, job.out), job.out + job.err
    assert job.outputs["verdict"] in ("inconclusive", "fail")
    assert job.code == 1
