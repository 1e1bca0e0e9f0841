"""Shared fixtures: the bike-shop example, factories of case results and runs, golden files.

Factories take overrides, so a test states only what it is about and the defaults describe an
ordinary, fully deterministic run (fixed names, times and latencies).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalgate.backends.base import BackendContext
from evalgate.backends.fake import FakeBackend, load_rules
from evalgate.cli import main
from evalgate.config.load import LoadedConfig, load_config
from evalgate.config.models import ModelSettings
from evalgate.running.suite import RunSpec, load_prompt, load_suite_cases, run_suite
from evalgate.runs.schema import CaseResult, ModelInfo, Outcome, PromptInfo, Run
from tests.support.messages_server import Knobs, MessagesServer

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "bike-shop"
EXAMPLES = ROOT / "examples"
GOLDEN = Path(__file__).resolve().parent / "golden"
# Set by scripts/regen-golden: the golden tests write what they render instead of comparing.
REGEN_GOLDEN = "EVALGATE_REGEN_GOLDEN"
CREATED = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="session", autouse=True)
def template_cache_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Compiled report templates kept in the session's own folder, never in the home folder
    (commands, and the child processes tests start, read EVALGATE_TEMPLATE_CACHE)."""
    from evalgate.report import template_cache

    folder = tmp_path_factory.mktemp("templates")
    before = os.environ.get(template_cache.VARIABLE)
    os.environ[template_cache.VARIABLE] = str(folder)
    yield folder
    if before is None:
        os.environ.pop(template_cache.VARIABLE, None)
    else:
        os.environ[template_cache.VARIABLE] = before


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def copy_example(dest: Path) -> Path:
    """A private copy of examples/bike-shop (without any saved state) at ``dest``."""
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns(".evalgate"))
    return dest


def with_repeats(root: Path, design: str) -> str:
    """``gate.repeats: DESIGN`` on every suite of ``root``'s evalgate.yml; the config's path."""
    path = root / "evalgate.yml"
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    for suite in config["suites"].values():
        suite.setdefault("gate", {})["repeats"] = design
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return str(path)


def fake_backend(options: dict[str, Any], base_dir: Path) -> FakeBackend:
    """The fake backend as the CLI builds it: from model settings and a context."""
    settings = ModelSettings(backend="fake", name="fake-classifier", options=options)
    return FakeBackend(settings, BackendContext(base_dir=base_dir))


def run_example(root: Path, version: str, *, limit: int | None = None, repeats: int = 1) -> Run:
    """A run of the bike-shop example's suite through the pipeline (in-process, not saved)."""
    loaded = load_config(root / "evalgate.yml")
    name, suite = loaded.suite(None)
    spec = RunSpec(
        suite_name=name,
        suite=suite,
        prompt=load_prompt(loaded, suite, version),
        cases=load_suite_cases(loaded, suite),
        limit=limit,
        repeats=repeats,
    )
    return run_suite(spec, fake_backend(suite.model.options, loaded.root), loaded.root)


@pytest.fixture
def bike_shop(tmp_path: Path) -> Path:
    return copy_example(tmp_path / "bike-shop")


@pytest.fixture(scope="session")
def example_run() -> Callable[[str], Run]:
    """Runs of the example as it is in the repository, one per prompt version, made once."""
    made: dict[str, Run] = {}

    def get(version: str) -> Run:
        if version not in made:
            made[version] = run_example(EXAMPLE, version)
        return made[version].model_copy(deep=True)

    return get


@pytest.fixture
def make_case() -> Callable[..., CaseResult]:
    """A scored case. ``answer`` may be a list (one outcome per repeat); ``error`` makes it an
    error; ``outcome`` overrides fields of every outcome; other keywords override the case."""

    def make(
        id: str = "c1",
        expected: Any = "booking",
        answer: str | list[str | None] | None = "booking",
        *,
        error: str | None = None,
        error_kind: str = "server",
        message: str = "Can I book my bike in for a service on Tuesday?",
        outcome: dict[str, Any] | None = None,
        **overrides: Any,
    ) -> CaseResult:
        answers = answer if isinstance(answer, list) else [answer]
        outcomes = []
        for a in answers:
            if error is not None:
                fields: dict[str, Any] = {"error": error, "error_kind": error_kind}
            else:
                fields = {
                    "text": f'{{"category": "{a}"}}',
                    "answer": a,
                    "score": float(a == expected),
                    "format_ok": True,
                    "stop_reason": "end_turn",
                }
            fields |= {"input_tokens": 120, "output_tokens": 8, "latency_s": 0.5}
            outcomes.append(Outcome(**(fields | (outcome or {}))))
        case: dict[str, Any] = {
            "id": id,
            "category": expected,
            "expected": expected,
            "group": f"g-{id}",
            "input": {"message": message},
            # The same id and content give the same hash, as a case file would.
            "hash": sha(f"{id}\0{expected}\0{message}"),
            "outcomes": outcomes,
        }
        return CaseResult(**(case | overrides))

    return make


@pytest.fixture
def make_run(make_case: Callable[..., CaseResult]) -> Callable[..., Run]:
    """A run with fixed name, time and provenance. ``prompt`` and ``model`` take dicts of
    overrides; ``cases`` defaults to two right answers; other keywords override the run."""

    def make(
        cases: list[CaseResult] | None = None,
        *,
        prompt: dict[str, Any] | None = None,
        model: dict[str, Any] | None = None,
        **overrides: Any,
    ) -> Run:
        prompt_info = {"name": "v1", "path": None} | (prompt or {})
        prompt_info.setdefault("sha256", sha(f"text of prompt {prompt_info['name']}"))
        if prompt_info["path"] is None:
            prompt_info["path"] = f"prompts/{prompt_info['name']}.txt"
        model_info = {
            "backend": "fake",
            "name": "fake-classifier",
            "max_tokens": 64,
            "temperature": 0.0,
            "options_sha256": sha("options"),
            "offline": True,
        } | (model or {})
        scorer = {"kind": "label", "field": "category"}
        run: dict[str, Any] = {
            "name": f"bike-shop-{prompt_info['name']}-20250601T120000-abcd",
            "created_at": CREATED,
            "suite": "bike-shop",
            "prompt": PromptInfo(**prompt_info),
            "cases_sha256": sha("cases"),
            "case_files": {"cases.jsonl": sha("cases.jsonl")},
            "model": ModelInfo(**model_info),
            "scorer": scorer,
            "scorer_sha256": sha(str(scorer)),
            "evalgate_version": "0.1.0",
            "wall_s": 2.5,
            "cases": cases
            if cases is not None
            else [make_case("c1"), make_case("c2", "quote", "quote")],
        }
        return Run(**(run | overrides))

    return make


def _same(text: str) -> object:
    return text


@pytest.fixture
def golden() -> Callable[..., None]:
    """Compare rendered text whole against tests/golden/NAME (or rewrite it under
    scripts/regen-golden). ``normalise`` maps both sides first (e.g. parse JSON)."""

    def check(name: str, text: str, normalise: Callable[[str], object] = _same) -> None:
        path = GOLDEN / name
        if os.environ.get(REGEN_GOLDEN):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8", newline="\n")
            return
        assert path.exists(), f"no golden file {path}: run scripts/regen-golden and review it"
        expected = path.read_text(encoding="utf-8")
        assert normalise(text) == normalise(expected), (
            f"{name} differs from its golden file; if the change is intended, run "
            "scripts/regen-golden and review `git diff tests/golden`"
        )

    return check


def shop_suite(
    root: Path,
    *,
    cases: int,
    model: dict[str, Any],
    scorer: dict[str, Any] | None = None,
    concurrency: int = 4,
    renumber: bool = True,
) -> LoadedConfig:
    """A one-suite config over bike-shop cases, all on the dev side, with the given model.

    ``renumber`` cycles through the example's cases under new ids (c0000, ...) so a suite can be
    larger than the example; otherwise the first ``cases`` cases keep their own ids.
    """
    root.mkdir(parents=True)
    shutil.copytree(EXAMPLE / "prompts", root / "prompts")
    shutil.copy(EXAMPLE / "fake-rules.yml", root / "fake-rules.yml")
    lines = (EXAMPLE / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    with (root / "cases.jsonl").open("w", encoding="utf-8") as out:
        for i in range(cases):
            record = records[i % len(records)] if renumber else records[i]
            renamed = {"id": f"c{i:04d}"} if renumber else {}
            out.write(json.dumps(record | renamed | {"split": "dev"}) + "\n")
    suite = {
        "prompts": "prompts/*.txt",
        "cases": "cases.jsonl",
        "fields": {"input": ["message"], "expected": "category"},
        "template": "<message>\n{{ message }}\n</message>",
        "model": model,
        "scorer": scorer or {"kind": "label", "field": "category"},
        "concurrency": concurrency,
    }
    config = {"version": 1, "suites": {"shop": suite}}
    (root / "evalgate.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return load_config(root / "evalgate.yml")


def spec_of(loaded: LoadedConfig, version: str = "v3", **overrides: Any) -> RunSpec:
    """The run spec of one prompt version of a one-suite config."""
    name, suite = loaded.suite(None)
    return RunSpec(
        suite_name=name,
        suite=suite,
        prompt=load_prompt(loaded, suite, version),
        cases=load_suite_cases(loaded, suite),
        **overrides,
    )


@pytest.fixture(scope="module")
def server() -> Iterator[MessagesServer]:
    """The Messages API stand-in answering like the bike-shop fake, one per test module."""
    with MessagesServer(load_rules({"rules_file": "fake-rules.yml"}, EXAMPLE)) as stand_in:
        yield stand_in


@pytest.fixture
def srv(server: MessagesServer) -> Iterator[MessagesServer]:
    """The stand-in with default knobs and empty counters; its own faults fail the test."""
    server.knobs = Knobs()
    server.reset()
    yield server
    assert server.errors == []


# (exit code, stdout, stderr) of one in-process `evalgate` call.
CliResult = tuple[int, str, str]


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Callable[..., CliResult]:
    """`evalgate ...` in-process (the console script is ``main``), in a clean environment.
    ``env`` sets variables for the call (the holdout key, typically)."""
    for name in ("EVALGATE_HOLDOUT_KEY", "CI", "GITHUB_REF", "GITHUB_REF_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_COLOR", "1")  # plain text to search, whatever the terminal

    def run(*argv: str, env: dict[str, str] | None = None) -> CliResult:
        with monkeypatch.context() as m:
            for name, value in (env or {}).items():
                m.setenv(name, value)
            out, err = io.StringIO(), io.StringIO()
            code = main(list(argv), out, err)
        return code, out.getvalue(), err.getvalue()

    return run


# An application that answers "spam" to every message, or fails as MODE says.
TRIAGE_APP = r"""
import json, os, sys
case = json.load(sys.stdin)
if os.environ.get("MODE") == "crash":
    sys.stderr.write("KeyError: 'thread'\n")
    sys.exit(4)
if os.environ.get("MODE") == "echo":  # the user turn it was sent, as the label
    print(json.dumps({"label": case["messages"][-1]["content"]}))
    sys.exit(0)
print(json.dumps({"label": "spam"}) if os.environ.get("MODE") == "ok" else "Spam, I think.")
"""


def triage_workspace(
    root: Path,
    *,
    mode: str = "ok",
    labels: tuple[str, ...] = (),
    command: str | None = None,
    fields: str = "{id: ticket, input: [body], expected: label, category: null}",
    template: str = "{{ body }}",
    model: str | None = None,
) -> Path:
    """A suite with no categories: four e-mails (fields ticket, thread, body, label), a
    `command` backend (TRIAGE_APP, or ``command``; ``model`` replaces the whole model mapping,
    as flow YAML), one prompt version."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "prompts").mkdir(exist_ok=True)
    (root / "prompts" / "v1.txt").write_text("Triage the e-mail.\n", encoding="utf-8")
    (root / "app.py").write_text(TRIAGE_APP, encoding="utf-8")
    labels = labels or ("spam", "spam", "urgent", "normal")
    rows = [
        {"ticket": f"T-{i}", "thread": f"th-{i}", "body": f"message number {i}", "label": label}
        for i, label in enumerate(labels, 1)
    ]
    (root / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    app = f"[{json.dumps(sys.executable)}, app.py]"
    (root / "evalgate.yml").write_text(
        "version: 1\n"
        "suites:\n"
        "  triage:\n"
        "    prompts: prompts/*.txt\n"
        "    cases: cases.jsonl\n"
        f"    fields: {fields}\n"
        f"    template: {json.dumps(template)}\n"
        + (
            f"    model: {model}\n"
            if model
            else "    model:\n"
            "      backend: command\n"
            "      name: triage-app\n"
            f"      options: {{command: {command or app}, env: {{MODE: {mode}}}}}\n"
        )
        + "    scorer: {kind: label, field: label}\n"
        "    split: {holdout_fraction: 0}\n",
        encoding="utf-8",
    )
    return root
