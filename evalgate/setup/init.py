"""`evalgate init` and `evalgate doctor`: set a repository up for evalgate, then check the setup.

init asks (or takes flags for) where the prompts and cases are, the backend, the model and the
scorer; it writes evalgate.yml, a workflow and, where none exist, a starter prompt and cases.
doctor checks the config, the cases, the split and the workflows that use the action, and says
what to fix. Every function here takes the paths it reads or writes and any way of asking
questions; the CLI decides the paths and owns stdin.
"""

from __future__ import annotations

import fnmatch
import functools
import glob
import json
import os
import posixpath
import re
import shlex
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from evalgate.backends.base import BACKEND_NAMES
from evalgate.cases.split import (
    STARTING_HOLDOUT_FRACTION,
    STARTING_HOLDOUT_MIN_CASES,
    starting_holdout_fraction,
)
from evalgate.cases.templating import compile_template, render_template
from evalgate.config.load import load_config, load_yaml, parse_config
from evalgate.config.models import DEFAULT_CONFIG
from evalgate.defaults import BASELINE_ARTIFACT, STATE_DIR, WORKFLOW
from evalgate.errors import UserError
from evalgate.files import read_text as read_user_text
from evalgate.report.render import render

if TYPE_CHECKING:
    from jinja2 import Template

Ask = Callable[[str], str]
YAML_SUFFIXES = (".yml", ".yaml")
BACKENDS = BACKEND_NAMES
SCORERS = ("label", "exact", "contains", "regex", "json_schema", "judge")
DEFAULT_MODELS = {
    "fake": "fake-classifier",
    "anthropic": "claude-haiku-4-5",
    "openai": "gpt-4o-mini",
    "command": "my-app",
}
DEFAULT_COMMAND = "python app.py"
# The secret each backend reads. The action takes the Anthropic key as an input; any other
# key reaches the container as an environment variable of the step.
SECRETS = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
SECRET_INPUTS = {"anthropic": "anthropic_api_key"}
HOLDOUT_SECRET = "EVALGATE_HOLDOUT_KEY"
SECRETS_PAGE = "Settings → Secrets and variables → Actions"

# What the written workflow uses: the evalgate action follows its major tag (there is no
# release sha to know at init time; doctor says to pin one), every other action a commit sha.
ACTION = "evalgate/evalgate@v0"
CHECKOUT = "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2"
UPLOAD = "actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02 # v4.6.2"


PROMPT_FOLDERS = ("prompts", "prompt")
PROMPT_SUFFIXES = (".txt", ".md", ".j2", ".jinja", ".prompt")
SKIP_FOLDERS = frozenset({"node_modules", "venv", "site-packages", "__pycache__", "dist", "build"})
ID_FIELDS = ("id", "case_id", "uid", "key", "name")
EXPECTED_FIELDS = ("expected", "category", "label", "answer", "target", "ideal", "intent", "class")
GROUP_FIELDS = ("group", "scenario", "group_id")
NOT_INPUT = frozenset({"split", "tags", "notes", "metadata", "meta", "source", "comment"})
STARTER_FIELD = "category"
STARTER_RULES: list[dict[str, Any]] = [
    {"label": "billing", "phrases": ["charged", "invoice", "refund", "payment"]},
    {"label": "bug", "phrases": ["error", "crash", "broken", "does not work"]},
]
DEFAULT_LABEL = "other"
# Words too common to tell one label's messages from another's.
_STOP = (
    "about been could does from have just like please that thank thanks them there they this "
    "what when will with would your"
)
STOP_WORDS = frozenset(_STOP.split())
_MAGIC = re.compile(r"[*?[]")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _data(name: str) -> str:
    return resources.files("evalgate").joinpath(f"data/init/{name}").read_text(encoding="utf-8")


@functools.cache
def _compiled(name: str) -> Template:
    return compile_template(_data(name), f"evalgate/data/init/{name}")


def _render(name: str, **context: Any) -> str:
    return render_template(_compiled(name), context, f"evalgate/data/init/{name}")


def gh_expression(expression: str) -> str:
    """A GitHub Actions expression, written from a jinja2 template."""
    return "${{ " + expression + " }}"


def shown_path(path: Path, base: Path) -> str:
    try:
        return path.resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return str(path)


# --------------------------------------------------------------------------- detection


def _walk(root: Path, depth: int = 4) -> Iterator[tuple[Path, list[str]]]:
    """Folders under ``root`` and their files, leaving out hidden, vendored and build folders."""
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        level = len(here.relative_to(root).parts)
        dirs[:] = sorted(
            d for d in dirs if not d.startswith(".") and d not in SKIP_FOLDERS and level < depth
        )
        yield here, sorted(files)


def find_prompts(root: Path) -> str | None:
    """A glob of the prompt files under ``root``: the shallowest prompts/ folder's commonest kind."""
    found: list[tuple[int, str]] = []
    for folder, files in _walk(root):
        if folder == root or folder.name.lower() not in PROMPT_FOLDERS:
            continue
        kinds = Counter(Path(f).suffix for f in files if Path(f).suffix in PROMPT_SUFFIXES)
        if kinds:
            rel = folder.relative_to(root)
            found.append((len(rel.parts), f"{rel.as_posix()}/*{kinds.most_common(1)[0][0]}"))
    return min(found)[1] if found else None


def _first_record(path: Path) -> dict[str, Any] | None:
    """The first case of a file, reading no more of a JSONL file than its first case."""
    if path.suffix.lower() in (".yml", ".yaml"):
        records, _ = read_sample([path], limit=1)
        return records[0] if records else None
    try:
        with path.open(encoding="utf-8") as handle:
            line = next((ln for ln in handle if ln.strip()), "")
        record = json.loads(line) if line else None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) else None


def find_cases(root: Path) -> str | None:
    """The most likely case file under ``root``: JSONL of objects, preferring a name with "case"."""
    found: list[tuple[int, int, str]] = []
    for folder, files in _walk(root):
        for name in files:
            lower = name.lower()
            jsonl = lower.endswith((".jsonl", ".ndjson")) and "sealed" not in lower
            if not (jsonl or lower in ("cases.yml", "cases.yaml")):
                continue
            path = folder / name
            if _first_record(path) is None:
                continue
            words = ("eval", "test", "golden", "dataset", "sample")
            rank = 0 if "case" in lower else 1 if any(w in lower for w in words) else 2
            rel = path.relative_to(root)
            found.append((rank, len(rel.parts), rel.as_posix()))
    return min(found)[2] if found else None


def read_sample(
    paths: list[Path], limit: int = 200, strict: bool = False
) -> tuple[list[dict[str, Any]], int]:
    """The first ``limit`` records (objects only) of case files, and how many cases they hold.

    Lenient on purpose: init only guesses from these; loading the cases is what validates them.
    A file that cannot be read at all (too big, YAML that does not parse or whose aliases
    expand past the bound) is passed over while looking for case files, and refused when
    ``strict`` (the files the config will name: a config that cannot load them is no start).
    """
    records: list[dict[str, Any]] = []
    total = 0
    for path in paths:
        is_yaml = path.suffix.lower() in YAML_SUFFIXES
        try:
            text = read_user_text(path, "case file")
            # The project's loader: aliases and nesting bounded, as every YAML file evalgate reads.
            data = load_yaml(text, path, UserError) if is_yaml else None
        except UserError:
            if strict:
                raise
            continue
        if is_yaml:
            if isinstance(data, dict) and isinstance(data.get("cases"), list):
                data = data["cases"]
            items = data if isinstance(data, list) else []
        else:
            items = []
            for line in text.splitlines():
                if not line.strip():
                    continue
                if len(records) + len(items) >= limit:
                    items.append(None)  # counted, not parsed
                    continue
                try:
                    items.append(json.loads(line))
                except json.JSONDecodeError:
                    items.append(None)
        total += len(items)
        records += [r for r in items if isinstance(r, dict)][: max(0, limit - len(records))]
    return records, total


def _ref_file(git: Path, ref: str) -> bool:
    if (git / ref).is_file():
        return True
    packed = git / "packed-refs"
    return packed.is_file() and f" {ref}\n" in packed.read_text(encoding="utf-8", errors="replace")


def default_branch(repo: Path) -> str:
    """The default branch: origin's HEAD, else main or master if they exist, else "main"."""
    git = repo / ".git"
    origin = git / "refs" / "remotes" / "origin" / "HEAD"
    if origin.is_file():
        text = origin.read_text(encoding="utf-8").strip()
        if text.startswith("ref: refs/remotes/origin/"):
            return text.removeprefix("ref: refs/remotes/origin/")
    for name in ("main", "master"):
        if _ref_file(git, f"refs/heads/{name}"):
            return name
    return "main"


def gitignore_covers(lines: list[str], rel: str) -> bool:
    """Whether .gitignore ``lines`` ignore the folder at ``rel`` (a posix path from its folder).

    The common forms only: anchored or not, trailing slash or /**, ** prefix, and negation.
    """
    name = rel.rsplit("/", 1)[-1]
    ignored = False
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.removeprefix("!").rstrip("/")
        for suffix in ("/**", "/*"):
            pattern = pattern.removesuffix(suffix)
        if pattern.startswith("**/"):
            pattern, anchored = pattern[3:], False
        else:
            anchored = "/" in pattern
            pattern = pattern.lstrip("/")
        if fnmatch.fnmatchcase(rel if anchored else name, pattern):
            ignored = not negate
    return ignored


# --------------------------------------------------------------------------- init


@dataclass(frozen=True)
class InitOptions:
    """What the flags said; None means ask (on a terminal) or take the detected default."""

    prompts: str | None = None
    cases: str | None = None
    backend: str | None = None
    model: str | None = None
    scorer: str | None = None
    field: str | None = None
    command: str | None = None
    suite: str | None = None
    branch: str | None = None
    id_field: str | None = None
    input_fields: list[str] | None = None


@dataclass(frozen=True)
class PlannedFile:
    path: Path
    text: str
    what: str
    # A starter is planned only because nothing exists there, so it never replaces a file.
    starter: bool = False


@dataclass(frozen=True)
class InitPlan:
    repo: Path
    config_path: Path
    files: tuple[PlannedFile, ...]
    suite: str
    version: str
    backend: str
    secrets: tuple[str, ...]
    branch: str
    notes: tuple[str, ...] = ()


class InitResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    written: list[str]
    gitignore: str | None
    config: str
    suite: str
    version: str
    backend: str
    secrets: list[str]
    branch: str
    next_steps: list[str]
    notes: list[str]


def _choose(
    ask: Ask | None,
    question: str,
    given: str | None,
    default: str,
    choices: tuple[str, ...] | None = None,
) -> str:
    if given is not None:
        if choices and given not in choices:
            raise UserError(f"{question}: {given!r}", fix=f"use one of: {', '.join(choices)}")
        return given
    if ask is None:
        return default
    hint = f" ({', '.join(choices)})" if choices else ""
    prefix = ""
    for _ in range(3):
        answer = ask(f"{prefix}{question}{hint} [{default}]: ").strip()
        if not answer:
            return default
        if choices is None or answer in choices:
            return answer
        prefix = f"{answer!r} is not one of them. "
    raise UserError(
        f"{question}: no valid answer", fix=f"answer one of: {', '.join(choices or ())}"
    )


def _starter_path(pattern: str, stem: str, suffixes: tuple[str, ...], fallback: str) -> str:
    """Where a starter file goes so that ``pattern`` finds it; ``fallback`` when no such place.

    A plain path is used as it is when its suffix is one of ``suffixes`` (the starter cases are
    JSONL, so cases.yaml cannot be one); a glob gets ``stem`` in its folder.
    """
    if not _MAGIC.search(pattern):
        return pattern if posixpath.splitext(pattern)[1] in suffixes else fallback
    parent, name = posixpath.split(pattern)
    own = posixpath.splitext(name)[1]
    candidate = posixpath.join(parent, stem + (own if own in suffixes else suffixes[0]))
    if not _MAGIC.search(parent) and fnmatch.fnmatchcase(candidate, pattern):
        return candidate
    return fallback


def _expand(root: Path, pattern: str) -> list[Path]:
    """Files matching ``pattern`` under ``root``, as the config will expand it."""
    matches = glob.glob(str(root / pattern), recursive=True) if pattern else []
    return sorted(p for p in map(Path, matches) if p.is_file())


def _suite_name(root: Path) -> str:
    name = re.sub(r"[^a-z0-9_-]+", "-", root.resolve().name.lower()).strip("-")
    return name or "main"


def _labels(records: list[dict[str, Any]], expected: str) -> list[str]:
    counts = Counter(r[expected] for r in records if isinstance(r.get(expected), str))
    return [label for label, _ in counts.most_common(30)]


def _fake_rules(records: list[dict[str, Any]], expected: str, inputs: list[str]) -> list[Any]:
    """Rules for the offline fake from existing cases: each label is found by words that occur
    in its cases' inputs and in no other label's (so the fake scores the bench, not zero)."""
    words: dict[str, Counter[str]] = {}
    for record in records:
        label = record.get(expected)
        if not isinstance(label, str) or not label.strip():
            continue
        text = " ".join(str(record.get(name, "")) for name in inputs).lower()
        found = set(re.findall(r"[a-z]{4,}", text)) - STOP_WORDS
        words.setdefault(label, Counter()).update(found)
    rules = []
    # Sorted by count, then by name: set order differs between processes, the config must not.
    for label, counts in sorted(words.items(), key=lambda item: (-item[1].total(), item[0])):
        if label == DEFAULT_LABEL:
            continue
        others = [c for other, c in words.items() if other != label]
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        own = [w for w, _ in ranked if not any(w in c for c in others)]
        rules.append({"label": label, "phrases": own[:8] or [label]})
    return rules[:30] or STARTER_RULES


def _template(inputs: list[str]) -> str:
    """The user turn: a single input between <message> tags (where the fake reads it)."""
    if len(inputs) == 1:
        value = inputs[0] if _IDENTIFIER.match(inputs[0]) else "input"
        return f"<message>\n{{{{ {value} }}}}\n</message>\n"
    parts = []
    for name in inputs:
        value = name if _IDENTIFIER.match(name) else f"input[{json.dumps(name)}]"
        tag = re.sub(r"[^A-Za-z0-9_-]+", "_", name)
        parts.append(f"<{tag}>\n{{{{ {value} }}}}\n</{tag}>\n")
    return "".join(parts)


# Field names that identify a case, a ticket or a thread: never what the model should read.
ID_LIKE = re.compile(
    r"(^|[_-])(id|ids|uuid|guid|key|ref)$|[a-z]Id$|^(ticket|thread|conversation)(_?no|_?number)?$",
    re.IGNORECASE,
)


def _values(records: list[dict[str, Any]], key: str) -> list[Any]:
    return [r[key] for r in records if r.get(key) is not None]


def _token_like(values: list[Any]) -> bool:
    """Scalars without whitespace (T-1042, 8f3a..., 17): what ids look like, not prose."""
    return bool(values) and all(
        isinstance(v, str | int) and not isinstance(v, bool) and not re.search(r"\s", str(v))
        for v in values
    )


def _id_like(records: list[dict[str, Any]], key: str) -> bool:
    return bool(ID_LIKE.search(key)) and _token_like(_values(records, key))


def detect_id_field(records: list[dict[str, Any]], keys: list[str]) -> str | None:
    """The field naming each case: a known id name, else an id-like name with unique values."""
    for key in (*ID_FIELDS, *keys):
        values = _values(records, key)
        known = key in ID_FIELDS
        if key in keys and values and (known or _id_like(records, key)):
            if _token_like(values) and len(set(map(str, values))) == len(values):
                return key
            if known and key == "id":
                return key  # duplicates are reported when the cases load
    return None


def detect_expected_field(
    records: list[dict[str, Any]], keys: list[str], id_field: str | None
) -> str:
    """The expected answer: a known name, else a field of short labels that repeat."""
    found = next((k for k in EXPECTED_FIELDS if k in keys), None)
    if found is not None:
        return found
    for key in keys:
        if key == id_field or _id_like(records, key):
            continue
        values = _values(records, key)
        labels = {v for v in values if isinstance(v, str) and len(v) <= 40}
        if values and len(labels) == len(set(map(str, values))) and len(labels) < len(values):
            return key
    return "expected"


def _fields(
    records: list[dict[str, Any]],
    expected: str | None,
    scorer: str,
    id_field: str | None = None,
    inputs: list[str] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The fields mapping for cases like ``records``, and what the user should look at.

    What is not given is detected: the id (a known name, or an id-like field whose values are
    unique), the expected answer (a known name, or short labels that repeat) and the inputs
    (every other field, less ids such as a ticket or thread number: they would reach the model)."""
    notes: list[str] = []
    keys = list(dict.fromkeys(k for r in records for k in r))
    id_field = id_field or detect_id_field(records, keys) or "id"
    if id_field not in keys:
        notes.append(
            f"the cases have no {id_field!r} field: give every case an id, or name the field "
            "that is one with --id-field"
        )
    expected = expected or detect_expected_field(records, keys, id_field)
    group = next((k for k in GROUP_FIELDS if k in keys), None)
    if "category" in keys:
        category: str | None = "category"
    else:
        category = expected if scorer == "label" else None
    if inputs is None:
        taken = {id_field, expected, group, category, *NOT_INPUT}
        inputs = [k for k in keys if k not in taken and not _id_like(records, k)]
        left_out = [k for k in keys if k not in taken and k not in inputs]
        if left_out:
            notes.append(
                f"left out of the model's input as ids: {', '.join(left_out)} (change it with "
                "--input-fields or fields.input)"
            )
        if not inputs:
            notes.append(
                "no field besides the id and the expected answer: set fields.input in evalgate.yml"
            )
            inputs = [expected]
    else:
        missing = [k for k in inputs if records and k not in keys]
        if missing:
            raise UserError(
                f"--input-fields names {', '.join(map(repr, missing))}, not in the cases",
                fix=f"the cases' fields: {', '.join(keys)}",
            )
    return {
        "id": id_field,
        "input": inputs,
        "expected": expected,
        "group": group,
        "category": category,
        "split": "split",
    }, notes


@dataclass(frozen=True)
class Answers:
    """What init settled on, from the flags, the questions or the defaults."""

    prompts: str
    cases: str
    backend: str
    model: str
    command: list[str] | None
    scorer: str
    expected: str
    id_field: str | None = None
    inputs: list[str] | None = None


def _answers(root: Path, given: InitOptions, ask: Ask | None, starter: list[Any]) -> Answers:
    prompts = _choose(
        ask, "Prompt files (a glob)", given.prompts, find_prompts(root) or "prompts/*.txt"
    )
    cases = _choose(ask, "Case files (a glob)", given.cases, find_cases(root) or "cases.jsonl")
    backend = _choose(ask, "Backend", given.backend, "fake", BACKENDS)
    model = _choose(ask, "Model", given.model, DEFAULT_MODELS[backend])
    command = None
    if backend == "command":
        command = shlex.split(_choose(ask, "Command to run", given.command, DEFAULT_COMMAND))
        if not command:
            raise UserError(
                "the command backend needs a command", fix="pass --command 'python app.py'"
            )
    scorer = _choose(ask, "Scorer", given.scorer, "label", SCORERS)
    records, _ = read_sample(_expand(root, cases), strict=True)
    sample = records or starter
    detected, _ = _fields(sample, given.field, scorer, given.id_field, given.input_fields)
    expected = _choose(
        ask, "Case field with the expected answer", given.field, str(detected["expected"])
    )
    if not records:
        # Starter cases are written with init's own fields: only the expected name is asked.
        return Answers(prompts, cases, backend, model, command, scorer, expected)
    detected, _ = _fields(sample, expected, scorer, given.id_field, given.input_fields)
    id_field = _choose(ask, "Case field with the id", given.id_field, str(detected["id"]))
    detected, _ = _fields(sample, expected, scorer, id_field, given.input_fields)
    shown = ", ".join(detected["input"])
    given_inputs = ", ".join(given.input_fields) if given.input_fields is not None else None
    answer = _choose(ask, "Case fields the model reads (comma-separated)", given_inputs, shown)
    inputs: list[str] | None = [k.strip() for k in answer.split(",") if k.strip()]
    if answer == shown and given.input_fields is None:
        inputs = None  # the detected default: detected again, with its notes, when planning
    return Answers(prompts, cases, backend, model, command, scorer, expected, id_field, inputs)


def _workflow_text(config_rel: str, used: list[str], branch: str) -> str:
    """The workflow for the backends ``used`` (the suite's and a judge's)."""
    inputs: list[tuple[str, str]] = []
    if config_rel != DEFAULT_CONFIG:
        inputs.append(("config", json.dumps(config_rel)))
    backends = list(dict.fromkeys(b for b in used if b in SECRETS))
    inputs += [
        (SECRET_INPUTS[b], gh_expression(f"secrets.{SECRETS[b]}"))
        for b in backends
        if b in SECRET_INPUTS
    ]
    env = [
        (SECRETS[b], gh_expression(f"secrets.{SECRETS[b]}"))
        for b in backends
        if b not in SECRET_INPUTS
    ]
    return _render(
        "workflow.yml.j2",
        gh=gh_expression,
        branch=branch,
        release_tags="v*",
        checkout=CHECKOUT,
        upload=UPLOAD,
        action=ACTION,
        inputs=inputs,
        env=env,
        holdout_secret=HOLDOUT_SECRET,
    )


def plan_init(
    repo: Path, config_path: Path, given: InitOptions, ask: Ask | None = None
) -> InitPlan:
    """Decide every file init writes (asking through ``ask`` for what ``given`` leaves open).

    The config is rendered and validated here, before anything is written.
    """
    root = config_path.parent
    try:
        config_rel = config_path.resolve().relative_to(repo.resolve()).as_posix()
    except ValueError:
        raise UserError(
            f"{config_path} is outside {repo}", fix="keep evalgate.yml inside the repository"
        ) from None
    starter = [json.loads(line) for line in _data("cases.jsonl").splitlines() if line]
    a = _answers(root, given, ask, starter)
    files: list[PlannedFile] = []

    cases, case_files, records, total = _plan_cases(root, a, starter, files)
    fields, notes = _fields(records, a.expected, a.scorer, a.id_field, a.inputs)
    prompts, version = _plan_prompts(root, a, records, files)

    suite = given.suite or _suite_name(root)
    real = a.backend in ("anthropic", "openai")
    judge_backend, judge_model = (
        (a.backend, a.model) if real else ("anthropic", DEFAULT_MODELS["anthropic"])
    )
    used = [a.backend] + ([judge_backend] if a.scorer == "judge" else [])
    fraction = starting_holdout_fraction(total)
    holdout_note = (
        "About 30% of groups; `evalgate split` counts them and checks for leaks."
        if fraction
        else f"None yet: set {STARTING_HOLDOUT_FRACTION} once there are about "
        f"{STARTING_HOLDOUT_MIN_CASES} cases "
        "(`evalgate split` checks it)."
    )
    config_text = _render(
        "evalgate.yml.j2",
        release_tags="v*",
        suite=suite,
        prompts=prompts,
        cases=cases,
        fields=fields,
        template=_template(list(fields["input"])),
        backend=a.backend,
        model=a.model,
        max_tokens=64 if a.scorer == "label" else 512,
        field=a.expected,
        default_label=DEFAULT_LABEL,
        rules=_fake_rules(records, a.expected, fields["input"]) if case_files else STARTER_RULES,
        command=a.command,
        scorer=a.scorer,
        judge_backend=judge_backend,
        judge_model=judge_model,
        holdout_note=holdout_note,
        holdout_fraction=fraction,
    )
    parse_config(config_text, config_path)  # every config init writes is valid
    branch = given.branch or default_branch(repo)
    files[:0] = [
        PlannedFile(config_path, config_text, f"suite {suite}"),
        PlannedFile(
            repo / WORKFLOW,
            _workflow_text(config_rel, used, branch),
            f"pull requests, pushes to {branch}, release tags",
        ),
    ]
    return InitPlan(
        repo=repo,
        config_path=config_path,
        files=tuple(files),
        suite=suite,
        version=version,
        backend=a.backend,
        secrets=tuple(dict.fromkeys(SECRETS[b] for b in used if b in SECRETS)),
        branch=branch,
        notes=tuple(notes),
    )


def _plan_cases(
    root: Path, a: Answers, starter: list[dict[str, Any]], files: list[PlannedFile]
) -> tuple[str, list[Path], list[dict[str, Any]], int]:
    """The case glob, the files it finds, a sample of their records and how many there are;
    with no case files, the starter cases (under the asked-for expected field) are planned."""
    cases = a.cases
    case_files = _expand(root, cases)
    records, total = read_sample(case_files, strict=True)
    if case_files:
        return cases, case_files, records, total
    if a.expected != STARTER_FIELD and a.expected in starter[0]:
        raise UserError(
            f"the starter cases already use the field {a.expected!r}",
            fix=f"pass another --field, e.g. {STARTER_FIELD}",
        )
    records = [{a.expected if k == STARTER_FIELD else k: v for k, v in r.items()} for r in starter]
    path = _starter_path(cases, "cases", (".jsonl",), "cases.jsonl")
    cases = cases if fnmatch.fnmatchcase(path, cases) else path
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    files.append(PlannedFile(root / path, text, f"{len(records)} starter cases", starter=True))
    return cases, case_files, records, len(records)


def _plan_prompts(
    root: Path, a: Answers, records: list[dict[str, Any]], files: list[PlannedFile]
) -> tuple[str, str]:
    """The prompt glob and the version to run first; with no prompt files, a starter prompt
    listing the labels the cases use is planned."""
    prompts = a.prompts
    prompt_files = _expand(root, prompts)
    if prompt_files:
        return prompts, sorted(p.stem for p in prompt_files)[-1]
    path = _starter_path(prompts, "v1", PROMPT_SUFFIXES, "prompts/v1.txt")
    prompts = prompts if fnmatch.fnmatchcase(path, prompts) else "prompts/*.txt"
    labels = _labels(records, a.expected) or [DEFAULT_LABEL]
    text = _render("prompt.txt.j2", labels=labels, field=a.expected)
    files.append(PlannedFile(root / path, text, "a starter prompt", starter=True))
    return prompts, posixpath.splitext(posixpath.basename(path))[0]


def setup_files(repo: Path, config_path: Path) -> list[Path]:
    """The files init writes whatever the answers (starter files are kept if they exist)."""
    return [config_path, repo / WORKFLOW]


def refuse_existing(paths: list[Path], repo: Path) -> None:
    """Refuse, before anything is asked or written, to replace a file init would write."""
    existing = [p for p in paths if p.exists()]
    if existing:
        names = " and ".join(shown_path(p, repo) for p in existing)
        raise UserError(
            f"{names} already exist{'s' if len(existing) == 1 else ''}",
            fix="pass --force to replace "
            + ("it" if len(existing) == 1 else "them")
            + ", or check the setup with `evalgate doctor`",
        )


def write_init(plan: InitPlan, *, force: bool = False, cwd: Path | None = None) -> InitResult:
    """Write the planned files; refuse to replace one without ``force``. ``cwd`` is where the
    user will type the next steps' commands."""
    if not force:
        refuse_existing([f.path for f in plan.files if not f.starter], plan.repo)
    written = []
    for planned in plan.files:
        if planned.starter and planned.path.exists():
            continue
        planned.path.parent.mkdir(parents=True, exist_ok=True)
        planned.path.write_text(planned.text, encoding="utf-8")
        written.append(f"{shown_path(planned.path, plan.repo)} ({planned.what})")
    loaded = load_config(plan.config_path)
    gitignore = plan.repo / ".gitignore"
    appended = None
    lines = gitignore.read_text(encoding="utf-8").splitlines() if gitignore.is_file() else []
    state_rel = shown_path(loaded.state_dir, plan.repo)
    if not gitignore_covers(lines, state_rel):
        text = gitignore.read_text(encoding="utf-8") if gitignore.is_file() else ""
        separator = "\n" if text and not text.endswith("\n") else ""
        with gitignore.open("a", encoding="utf-8") as handle:
            handle.write(
                f"{separator}# evalgate: runs, the response cache, baselines\n{STATE_DIR}/\n"
            )
        appended = shown_path(gitignore, plan.repo)
    cwd = cwd or plan.repo
    config_arg = shown_path(plan.config_path, cwd)
    run = f"evalgate run {plan.version}"
    if config_arg != DEFAULT_CONFIG:
        run += f" --config {shlex.quote(config_arg)}"
    return InitResult(
        written=written,
        gitignore=appended,
        config=shown_path(plan.config_path, plan.repo),
        suite=plan.suite,
        version=plan.version,
        backend=plan.backend,
        secrets=list(plan.secrets),
        branch=plan.branch,
        next_steps=_next_steps(plan, run),
        notes=list(plan.notes),
    )


def _next_steps(plan: InitPlan, run: str) -> list[str]:
    first = f"Run it locally: `{run}`"
    if plan.backend == "fake":
        first += " (the offline fake model: its numbers test the setup, not a prompt)"
    if plan.secrets:
        names = " and ".join(plan.secrets)
        second = f"Add the secret {names} in the GitHub repository under {SECRETS_PAGE}"
    elif plan.backend == "fake":
        second = (
            "No secret to add: the fake backend runs offline (switch model.backend to anthropic "
            f"and add ANTHROPIC_API_KEY under {SECRETS_PAGE} when you are ready)"
        )
    else:
        second = (
            "No secret is passed to the command backend: if your program needs one, add it "
            f"under {SECRETS_PAGE} and to the evalgate steps' env: in {WORKFLOW}"
        )
    third = (
        f"Commit and push to {plan.branch}, so the baseline job uploads the "
        f"{BASELINE_ARTIFACT} artefact; then open a pull request that changes a prompt"
    )
    return [first, second, third]


def render_init(result: InitResult, fmt: str) -> str:
    if fmt == "json":
        return result.model_dump_json(indent=2) + "\n"
    return render("init.txt.j2", s=result, state_dir=STATE_DIR)
