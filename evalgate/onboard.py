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
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict

from evalgate.config import DEFAULT_CONFIG, LoadedConfig, Suite, load_config, parse_config
from evalgate.errors import UserError
from evalgate.pipeline import load_prompt, load_suite_cases
from evalgate.split import LEAK_KINDS, check_split
from evalgate.templating import compile_template, render

if TYPE_CHECKING:
    from jinja2 import Template

Ask = Callable[[str], str]
# The C parser when PyYAML has it: doctor reads every workflow file of a repository.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

BACKENDS = ("fake", "anthropic", "openai", "command")
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
STATE_DIR = ".evalgate"
WORKFLOW = ".github/workflows/evalgate.yml"
BASELINE_ARTIFACT = "evalgate-baseline"

# What the written workflow uses: the evalgate action follows its major tag (there is no
# release sha to know at init time; doctor says to pin one), every other action a commit sha.
ACTION = "evalgate/evalgate@v0"
CHECKOUT = "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2"
CACHE = "actions/cache@1bd1e32a3bdc45362d1e726936510720a7c30a57 # v4.2.0"
UPLOAD = "actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02 # v4.6.2"

# A holdout of about 0.3 x 150 = 45 cases clears the default min_holdout (40): below that, init
# starts the suite without a holdout rather than with one too small to read.
HOLDOUT_FRACTION = 0.3
HOLDOUT_MIN_CASES = 150

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
    return render(_compiled(name), context, f"evalgate/data/init/{name}")


def _gh(expression: str) -> str:
    """A GitHub Actions expression, written from a jinja2 template."""
    return "${{ " + expression + " }}"


def _show(path: Path, base: Path) -> str:
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


def read_sample(paths: list[Path], limit: int = 200) -> tuple[list[dict[str, Any]], int]:
    """The first ``limit`` records (objects only) of case files, and how many cases they hold.

    Lenient on purpose: init only guesses from these; loading the cases is what validates them.
    """
    records: list[dict[str, Any]] = []
    total = 0
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if path.suffix.lower() in (".yml", ".yaml"):
            try:
                data = yaml.load(text, Loader=_YAML_LOADER)
            except yaml.YAMLError:
                continue
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


def _fields(
    records: list[dict[str, Any]], expected: str | None, scorer: str
) -> tuple[dict[str, Any], list[str]]:
    """The fields mapping for cases like ``records``, and what the user should look at."""
    notes: list[str] = []
    keys = list(dict.fromkeys(k for r in records for k in r))
    id_field = next((k for k in ID_FIELDS if k in keys), "id")
    if id_field not in keys:
        notes.append("the cases have no id field: give every case an `id`")
    expected = expected or next((k for k in EXPECTED_FIELDS if k in keys), "expected")
    group = next((k for k in GROUP_FIELDS if k in keys), None)
    if "category" in keys:
        category: str | None = "category"
    else:
        category = expected if scorer == "label" else None
    taken = {id_field, expected, group, category, *NOT_INPUT}
    inputs = [k for k in keys if k not in taken]
    if not inputs:
        notes.append(
            "no field besides the id and the expected answer: set fields.input in evalgate.yml"
        )
        inputs = [expected]
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
    records, _ = read_sample(_expand(root, cases))
    detected, _ = _fields(records or starter, None, scorer)
    expected = _choose(
        ask, "Case field with the expected answer", given.field, str(detected["expected"])
    )
    return Answers(prompts, cases, backend, model, command, scorer, expected)


def _workflow_text(config_rel: str, used: list[str], branch: str) -> str:
    """The workflow for the backends ``used`` (the suite's and a judge's)."""
    inputs: list[tuple[str, str]] = []
    if config_rel != DEFAULT_CONFIG:
        inputs.append(("config", json.dumps(config_rel)))
    backends = list(dict.fromkeys(b for b in used if b in SECRETS))
    inputs += [
        (SECRET_INPUTS[b], _gh(f"secrets.{SECRETS[b]}")) for b in backends if b in SECRET_INPUTS
    ]
    env = [(SECRETS[b], _gh(f"secrets.{SECRETS[b]}")) for b in backends if b not in SECRET_INPUTS]
    state_rel = posixpath.join(posixpath.dirname(config_rel), STATE_DIR)
    return _render(
        "workflow.yml.j2",
        gh=_gh,
        branch=branch,
        release_tags="v*",
        checkout=CHECKOUT,
        cache=CACHE,
        upload=UPLOAD,
        action=ACTION,
        cache_path=f"{state_rel}/cache",
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

    cases = a.cases
    case_files = _expand(root, cases)
    records, total = read_sample(case_files)
    if not case_files:
        if a.expected != STARTER_FIELD and a.expected in starter[0]:
            raise UserError(
                f"the starter cases already use the field {a.expected!r}",
                fix=f"pass another --field, e.g. {STARTER_FIELD}",
            )
        records = [
            {a.expected if k == STARTER_FIELD else k: v for k, v in r.items()} for r in starter
        ]
        total = len(records)
        path = _starter_path(cases, "cases", (".jsonl",), "cases.jsonl")
        cases = cases if fnmatch.fnmatchcase(path, cases) else path
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        files.append(PlannedFile(root / path, text, f"{total} starter cases", starter=True))
    fields, notes = _fields(records, a.expected, a.scorer)

    prompts = a.prompts
    prompt_files = _expand(root, prompts)
    if prompt_files:
        version = sorted(p.stem for p in prompt_files)[-1]
    else:
        path = _starter_path(prompts, "v1", PROMPT_SUFFIXES, "prompts/v1.txt")
        prompts = prompts if fnmatch.fnmatchcase(path, prompts) else "prompts/*.txt"
        labels = _labels(records, a.expected) or [DEFAULT_LABEL]
        text = _render("prompt.txt.j2", labels=labels, field=a.expected)
        files.append(PlannedFile(root / path, text, "a starter prompt", starter=True))
        version = posixpath.splitext(posixpath.basename(path))[0]

    suite = given.suite or _suite_name(root)
    real = a.backend in ("anthropic", "openai")
    judge_backend, judge_model = (
        (a.backend, a.model) if real else ("anthropic", DEFAULT_MODELS["anthropic"])
    )
    used = [a.backend] + ([judge_backend] if a.scorer == "judge" else [])
    fraction = HOLDOUT_FRACTION if total >= HOLDOUT_MIN_CASES else 0.0
    holdout_note = (
        "About 30% of groups; `evalgate split` counts them and checks for leaks."
        if fraction
        else f"None yet: set {HOLDOUT_FRACTION} once there are about {HOLDOUT_MIN_CASES} cases "
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


def write_init(plan: InitPlan, *, force: bool = False, cwd: Path | None = None) -> InitResult:
    """Write the planned files; refuse to replace one without ``force``. ``cwd`` is where the
    user will type the next steps' commands."""
    existing = [f.path for f in plan.files if f.path.exists() and not f.starter]
    if existing and not force:
        names = " and ".join(_show(p, plan.repo) for p in existing)
        raise UserError(
            f"{names} already exist{'s' if len(existing) == 1 else ''}",
            fix="pass --force to replace "
            + ("it" if len(existing) == 1 else "them")
            + ", or check the setup with `evalgate doctor`",
        )
    written = []
    for planned in plan.files:
        if planned.starter and planned.path.exists():
            continue
        planned.path.parent.mkdir(parents=True, exist_ok=True)
        planned.path.write_text(planned.text, encoding="utf-8")
        written.append(f"{_show(planned.path, plan.repo)} ({planned.what})")
    loaded = load_config(plan.config_path)
    gitignore = plan.repo / ".gitignore"
    appended = None
    lines = gitignore.read_text(encoding="utf-8").splitlines() if gitignore.is_file() else []
    state_rel = _show(loaded.state_dir, plan.repo)
    if not gitignore_covers(lines, state_rel):
        text = gitignore.read_text(encoding="utf-8") if gitignore.is_file() else ""
        separator = "\n" if text and not text.endswith("\n") else ""
        with gitignore.open("a", encoding="utf-8") as handle:
            handle.write(
                f"{separator}# evalgate: runs, the response cache, baselines\n{STATE_DIR}/\n"
            )
        appended = _show(gitignore, plan.repo)
    cwd = cwd or plan.repo
    config_arg = _show(plan.config_path, cwd)
    run = f"evalgate run {plan.version}"
    if config_arg != DEFAULT_CONFIG:
        run += f" --config {shlex.quote(config_arg)}"
    return InitResult(
        written=written,
        gitignore=appended,
        config=_show(plan.config_path, plan.repo),
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
    lines = [f"wrote {path}" for path in result.written]
    if result.gitignore:
        lines.append(f"added {STATE_DIR}/ to {result.gitignore}")
    lines += [f"note: {note}" for note in result.notes]
    lines += ["", "Next steps:"]
    lines += [f"  {i}. {step}" for i, step in enumerate(result.next_steps, start=1)]
    lines += ["", "Check the setup any time with `evalgate doctor`."]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- doctor

Status = Literal["ok", "warn", "FAIL"]


class Finding(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    status: Status
    check: str
    message: str
    fix: str | None = None


class DoctorReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    repo: str
    config: str
    findings: list[Finding]
    counts: dict[str, int]

    @property
    def failed(self) -> bool:
        return self.counts["FAIL"] > 0


def _ok(check: str, message: str) -> Finding:
    return Finding(status="ok", check=check, message=message)


def _warn(check: str, message: str, fix: str | None = None) -> Finding:
    return Finding(status="warn", check=check, message=message, fix=fix)


def _fail(check: str, message: str, fix: str | None = None) -> Finding:
    return Finding(status="FAIL", check=check, message=message, fix=fix)


def _from_error(check: str, exc: UserError) -> Finding:
    what = f"{exc.where}: {exc.what}" if exc.where else exc.what
    return _fail(check, what, exc.fix)


def _check_suite(loaded: LoadedConfig, name: str, suite: Suite) -> list[Finding]:
    out: list[Finding] = []
    label = f"suite {name}"
    try:
        versions = loaded.prompt_files(suite)
        for version in versions:
            load_prompt(loaded, suite, version)
        ship = loaded.ship_version(suite)
    except UserError as exc:
        out.append(_from_error(f"{label}: prompts", exc))
    else:
        shown = ", ".join(sorted(versions))
        out.append(_ok(f"{label}: prompts", f"{len(versions)} version(s) load ({shown})"))
        out.append(_ok(f"{label}: ship", f"pull requests and releases gate {ship}"))
    out += _check_backends(loaded, label, suite)
    try:
        missing = [p for p in loaded.dependencies(suite) if not p.exists()]
    except UserError:
        missing = []  # a glob that matches nothing is reported by the prompts or cases check
    if suite.sealed_holdout is not None:
        key = (loaded.root / suite.sealed_holdout.public_key).resolve()
        missing += [key] if not key.exists() and key not in missing else []
    if missing:
        out.append(
            _fail(
                f"{label}: files",
                "missing: " + ", ".join(_show(p, loaded.root) for p in missing),
                "paths are relative to evalgate.yml; a sealed holdout starts with "
                "`evalgate holdout keygen` and `evalgate holdout add FILE`",
            )
        )
    notes: list[str] = []
    try:
        cases = load_suite_cases(loaded, suite, on_note=notes.append)
    except UserError as exc:
        out.append(_from_error(f"{label}: cases", exc))
        return out
    if notes:
        out.append(_warn(f"{label}: cases", f"{len(cases.cases)} cases load; " + "; ".join(notes)))
    else:
        out.append(_ok(f"{label}: cases", f"{len(cases.cases)} cases load"))
    report = check_split(cases.cases, suite.split, suite.fields)
    for finding in report.findings:
        ids = ""
        if finding.ids:
            more = "…" if len(finding.ids) > 5 else ""
            ids = f" (ids: {', '.join(finding.ids[:5])}{more})"
        if finding.kind in LEAK_KINDS:
            fix = "fix the cases, then check with `evalgate split`"
            out.append(_fail(f"{label}: split", f"leak: {finding.message}{ids}", fix))
        else:
            out.append(_warn(f"{label}: split", f"{finding.message}{ids}"))
    counts = report.counts
    if counts["dev"] == 0:
        out.append(
            _fail(
                f"{label}: split",
                "no dev cases: pull requests would run nothing",
                "lower split.holdout_fraction, or add cases",
            )
        )
    elif not report.findings:
        out.append(
            _ok(
                f"{label}: split",
                f"dev {counts['dev']}, holdout {counts['holdout']}, "
                f"regression {counts['regression']}; no leaks",
            )
        )
    return out


def _check_backends(loaded: LoadedConfig, label: str, suite: Suite) -> list[Finding]:
    from evalgate.backends.base import backend_names

    models = [("model", suite.model)]
    if suite.scorer.kind == "judge":
        models.append(("judge", suite.scorer.model))
    out = []
    for role, settings in models:
        check = f"{label}: {role}"
        if settings.backend not in backend_names():
            out.append(
                _fail(
                    check,
                    f"unknown backend {settings.backend!r}",
                    f"use one of: {', '.join(backend_names())}",
                )
            )
            continue
        if settings.backend == "fake":
            from evalgate.backends.fake import load_rules

            try:
                load_rules(settings.options, loaded.root)
            except UserError as exc:
                out.append(_from_error(check, exc))
                continue
        secret = SECRETS.get(settings.backend)
        needs = f"; needs {secret}" if secret and _needs_key(settings.backend, settings) else ""
        out.append(_ok(check, f"{settings.backend} {settings.name}{needs}"))
    return out


def _needs_key(backend: str, settings: Any) -> bool:
    return backend == "anthropic" or (
        backend == "openai" and settings.options.get("key_required", True) is not False
    )


# --- workflows

Role = Literal["pr", "baseline", "release"]


@dataclass
class Job:
    name: str
    data: dict[str, Any]
    steps: list[dict[str, Any]]
    evalgate: list[dict[str, Any]]
    roles: set[str] = field(default_factory=set)


@dataclass
class Workflow:
    rel: str
    data: dict[str, Any]
    triggers: dict[str, Any]
    jobs: list[Job]


def _is_evalgate(uses: str) -> bool:
    return bool(re.search(r"(^|/)evalgate@", uses)) or uses.rstrip("/") == "."


def _pinned(uses: str) -> bool:
    if uses.startswith("./"):
        return True
    if uses.startswith("docker://"):
        return "@sha256:" in uses
    return bool(re.search(r"@[0-9a-f]{40}$", uses))


def _triggers(data: dict[Any, Any]) -> dict[str, Any]:
    # YAML 1.1 reads the key `on` as true.
    on = data.get("on", data.get(True))
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return {str(t): None for t in on}
    return {str(k): v for k, v in on.items()} if isinstance(on, dict) else {}


def _with(step: dict[str, Any]) -> dict[str, str]:
    given = step.get("with")
    return {str(k): str(v) for k, v in given.items()} if isinstance(given, dict) else {}


def _roles(job: dict[str, Any], step: dict[str, Any], triggers: dict[str, Any]) -> set[str]:
    """Which modes an evalgate step runs in: its ``mode`` input, else the events that reach it."""
    mode = _with(step).get("mode", "auto")
    if mode in ("pr", "baseline", "release"):
        return {mode}
    if mode != "auto":
        return set()
    roles: set[str] = set()
    if "pull_request" in triggers or "pull_request_target" in triggers:
        roles.add("pr")
    if "push" in triggers:
        push = triggers["push"] if isinstance(triggers["push"], dict) else {}
        branches = "branches" in push or "branches-ignore" in push
        tags = "tags" in push or "tags-ignore" in push
        if branches or not tags:
            roles.add("baseline")
        if tags or not branches:
            roles.add("release")
    if "schedule" in triggers:
        roles.add("baseline")
    condition = str(job.get("if", ""))
    if re.search(r"event_name\s*==\s*'pull_request", condition):
        roles &= {"pr"}
    if re.search(r"event_name\s*!=\s*'pull_request", condition):
        roles.discard("pr")
    if re.search(r"event_name\s*==\s*'push'", condition):
        roles -= {"pr"}
    tag_test = r"startsWith\(\s*github\.ref\s*,\s*'refs/tags/"
    if re.search(r"!\s*" + tag_test, condition):
        roles.discard("release")
    elif re.search(tag_test, condition):
        roles &= {"release"}
    return roles


def read_workflows(repo: Path) -> tuple[list[Workflow], list[Finding]]:
    """The workflows under .github/workflows that use the evalgate action."""
    folder = repo / ".github" / "workflows"
    paths = sorted(p for p in folder.glob("*") if p.suffix in (".yml", ".yaml"))
    found: list[Workflow] = []
    problems: list[Finding] = []
    for path in paths:
        rel = _show(path, repo)
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            data = yaml.load(text, Loader=_YAML_LOADER)
        except yaml.YAMLError as exc:
            if "evalgate" in text:
                problems.append(_fail(f"workflow {rel}", f"invalid YAML: {exc}"))
            continue
        if not isinstance(data, dict) or not isinstance(data.get("jobs"), dict):
            continue
        triggers = _triggers(data)
        jobs = []
        for name, job in data["jobs"].items():
            if not isinstance(job, dict):
                continue
            raw = job.get("steps")
            steps = [s for s in raw if isinstance(s, dict)] if isinstance(raw, list) else []
            ours = [s for s in steps if _is_evalgate(str(s.get("uses", "")))]
            roles: set[str] = set()
            for step in ours:
                roles |= _roles(job, step, triggers)
            jobs.append(Job(str(name), job, steps, ours, roles))
        if any(job.evalgate for job in jobs):
            found.append(Workflow(rel, data, triggers, jobs))
    return found, problems


def _level(permissions: Any, scope: str) -> int:
    """0 none, 1 read, 2 write."""
    if permissions == "write-all":
        return 2
    if permissions == "read-all":
        return 1
    if isinstance(permissions, dict):
        return {"write": 2, "read": 1}.get(str(permissions.get(scope, "none")), 0)
    return 0


# (scope, level, status when missing, what for), per role.
NEEDS: dict[str, list[tuple[str, int, Status, str]]] = {
    "pr": [
        ("pull-requests", 2, "FAIL", "the comment"),
        ("actions", 1, "FAIL", "reading the baseline artefact"),
        ("contents", 1, "warn", "the checkout"),
    ],
    "release": [
        ("contents", 2, "FAIL", "the evalgate-data branch: release history and the read ledger"),
        ("checks", 2, "warn", "the check run on the tagged commit"),
    ],
    "baseline": [("contents", 1, "warn", "the checkout")],
}
_NAMES = {1: "read", 2: "write"}


def _check_permissions(workflow: Workflow) -> list[Finding]:
    check = f"workflow {workflow.rel}: permissions"
    top = workflow.data.get("permissions")
    out: list[Finding] = []
    if top == "write-all":
        out.append(
            _warn(check, "the workflow grants `permissions: write-all`", "list only the scopes")
        )
    for job in workflow.jobs:
        if not job.roles:
            continue
        permissions = job.data.get("permissions", top)
        needed = [n for role in sorted(job.roles) for n in NEEDS[role]]
        wanted = ", ".join(f"{s}: {_NAMES[lvl]}" for s, lvl, _, _ in needed)
        if permissions is None:
            out.append(
                _warn(
                    check,
                    f"job {job.name} has no permissions block, so its token gets the "
                    "repository's default (read-only in new repositories, where the comment "
                    "fails; write-all in older ones)",
                    f"add to job {job.name}: permissions: {{{wanted}}}",
                )
            )
            continue
        if job.data.get("permissions") == "write-all":
            out.append(
                _warn(
                    check,
                    f"job {job.name} has `permissions: write-all`",
                    f"grant only {wanted}",
                )
            )
            continue
        for scope, level, status, why in needed:
            if _level(permissions, scope) < level:
                out.append(
                    Finding(
                        status=status,
                        check=check,
                        message=f"job {job.name} ({'/'.join(sorted(job.roles))}) lacks "
                        f"`{scope}: {_NAMES[level]}`, needed for {why}",
                        fix=f"add `{scope}: {_NAMES[level]}` to job {job.name}'s permissions",
                    )
                )
    if not out:
        jobs = ", ".join(
            f"{j.name} ({'/'.join(sorted(j.roles))})" for j in workflow.jobs if j.roles
        )
        out.append(_ok(check, f"each evalgate job has the scopes it needs: {jobs}"))
    return out


def _check_pins(workflow: Workflow) -> list[Finding]:
    check = f"workflow {workflow.rel}: pinning"
    refs = []
    for job in workflow.jobs:
        refs += [str(s["uses"]) for s in job.steps if "uses" in s]
        if isinstance(job.data.get("uses"), str):
            refs.append(job.data["uses"])
    ours = sorted({r for r in refs if _is_evalgate(r) and not _pinned(r)})
    loose = sorted({r for r in refs if not _is_evalgate(r) and not _pinned(r)})
    if loose:
        return [
            _warn(
                check,
                "actions not pinned to a commit sha (a moved tag runs other code with this "
                "job's token and secrets): " + ", ".join(loose),
                "pin each to the full commit sha of its release, with the tag in a comment",
            )
        ]
    message = "third-party actions are pinned to commit shas"
    if ours:
        message += f" ({', '.join(ours)} follows a tag: pin it to a release's sha once adopted)"
    return [_ok(check, message)]


def _checks_out_head(step: dict[str, Any]) -> bool:
    heads = ("github.event.pull_request.head", "github.head_ref", "refs/pull/", "gh pr checkout")
    if str(step.get("uses", "")).startswith("actions/checkout"):
        text = " ".join(_with(step).values())
    else:
        text = str(step.get("run", ""))
    return any(h in text for h in heads)


def _check_trigger(workflow: Workflow) -> list[Finding]:
    if "pull_request_target" not in workflow.triggers:
        return []
    check = f"workflow {workflow.rel}: pull_request_target"
    heads = sorted({j.name for j in workflow.jobs for s in j.steps if _checks_out_head(s)})
    if heads:
        return [
            _fail(
                check,
                f"pull_request_target with a checkout of the pull request's code (job "
                f"{', '.join(heads)}): the job has this repository's secrets and a write token, "
                "and the PR's prompts, templates, command backend or python scorer run inside "
                "it, so anyone who opens a pull request can read the API key or push code",
                "trigger on pull_request (fork PRs get no secrets; evalgate explains the safe "
                "patterns), or run the PR's code unprivileged and post from a workflow_run job",
            )
        ]
    return [
        _warn(
            check,
            "pull_request_target runs the base branch's code, so the gate tests the base "
            "prompt, not the pull request's",
            "trigger on pull_request",
        )
    ]


def _env_secret(workflow: Workflow, job: Job, step: dict[str, Any], name: str) -> str | None:
    for scope in (step, job.data, workflow.data):
        env = scope.get("env")
        if isinstance(env, dict) and name in env:
            return str(env[name])
    return None


def _check_secrets(workflow: Workflow, loaded: LoadedConfig) -> list[Finding]:
    check = f"workflow {workflow.rel}: secrets"
    suites = list(loaded.config.suites.items())
    models = [(n, s.model) for n, s in suites]
    models += [(n, s.scorer.model) for n, s in suites if s.scorer.kind == "judge"]
    need = {m.backend: n for n, m in models if m.backend in SECRETS and _needs_key(m.backend, m)}
    sealed = [n for n, s in suites if s.sealed_holdout is not None]
    out: list[Finding] = []
    seen: set[str] = set()
    for job in workflow.jobs:
        if not job.roles:
            continue
        for step in job.evalgate:
            given = _with(step)
            for backend, suite in need.items():
                secret = SECRETS[backend]
                wanted = _gh(f"secrets.{secret}")
                if backend in SECRET_INPUTS:
                    where = f"input {SECRET_INPUTS[backend]}"
                    value = given.get(SECRET_INPUTS[backend])
                    fix = f"add `{SECRET_INPUTS[backend]}: {wanted}` to the evalgate step's with:"
                else:
                    where = f"env {secret}"
                    value = _env_secret(workflow, job, step, secret)
                    fix = f"add `env: {{{secret}: {wanted}}}` to the evalgate step"
                if not value:
                    out.append(
                        _fail(
                            check,
                            f"job {job.name}: suite {suite} runs on {backend}, and the evalgate "
                            f"step has no {where}",
                            f"{fix}, and the secret {secret} under {SECRETS_PAGE}",
                        )
                    )
                elif "${{" not in value:
                    out.append(
                        _fail(
                            check,
                            f"job {job.name}: the {where} is written into the workflow, where "
                            "anyone who can read the repository can use it",
                            f"revoke that key; store a new one as {secret} under {SECRETS_PAGE} "
                            f"and pass {wanted}",
                        )
                    )
                else:
                    seen.update(re.findall(r"secrets\.([A-Za-z0-9_]+)", value))
            holdout = given.get("holdout_key")
            if sealed and "release" in job.roles:
                if not holdout:
                    out.append(
                        _fail(
                            check,
                            f"job {job.name} makes releases of suite {sealed[0]}, whose holdout "
                            "is sealed, and passes no holdout_key",
                            f"add `holdout_key: {_gh('secrets.' + HOLDOUT_SECRET)}`, with the "
                            "secret in the job's protected environment",
                        )
                    )
                elif not job.data.get("environment"):
                    out.append(
                        _fail(
                            check,
                            f"job {job.name} passes holdout_key outside an environment, so the "
                            "key is a repository secret any workflow on any branch can read",
                            f"add `environment: release` to job {job.name}, protect it under "
                            f"Settings → Environments, and move {HOLDOUT_SECRET} into it",
                        )
                    )
                else:
                    seen.update(re.findall(r"secrets\.([A-Za-z0-9_]+)", holdout))
            if holdout and "pr" in job.roles:
                out.append(
                    _fail(
                        check,
                        f"job {job.name} runs on pull requests and gets holdout_key: a pull "
                        "request could read the sealed holdout",
                        "pass holdout_key only in the release job",
                    )
                )
    if not out:
        if seen:
            names = ", ".join(sorted(seen))
            message = f"the evalgate steps pass {names}: make sure each exists under {SECRETS_PAGE}"
        else:
            message = "the suites' backends need no secret"
        out.append(_ok(check, message))
    return out


def _check_baseline_upload(workflow: Workflow) -> tuple[list[Finding], list[str]]:
    """Each baseline job uploads the run file; returns the artefact names it uploads."""
    check = f"workflow {workflow.rel}: baseline"
    out: list[Finding] = []
    names: list[str] = []
    for job in workflow.jobs:
        if "baseline" not in job.roles:
            continue
        ids = [str(s["id"]) for s in job.evalgate if "id" in s]
        uploads = [
            s for s in job.steps if str(s.get("uses", "")).startswith("actions/upload-artifact")
        ]
        good = [
            s
            for s in uploads
            if any(f"steps.{i}.outputs.run_file" in _with(s).get("path", "") for i in ids)
        ]
        if good:
            names += [_with(s).get("name", "artifact") for s in good]
            continue
        step_id = ids[0] if ids else "evalgate"
        fix = (
            f"add a step `uses: {UPLOAD.split(' ')[0]}` with name: {BASELINE_ARTIFACT} and "
            f"path: {_gh(f'steps.{step_id}.outputs.run_file')}"
        )
        if not ids:
            fix = f"give the evalgate step `id: evalgate`, then {fix}"
        out.append(
            _fail(
                check,
                f"job {job.name} makes a baseline but does not upload the run file, so pull "
                "requests find no baseline",
                fix,
            )
        )
    if not out and names:
        out.append(_ok(check, f"baseline runs are uploaded as {', '.join(sorted(set(names)))}"))
    return out, names


def _check_workflows(repo: Path, config_path: Path, loaded: LoadedConfig | None) -> list[Finding]:
    workflows, out = read_workflows(repo)
    if not workflows:
        if not out:
            out.append(
                _warn(
                    "workflows",
                    "no workflow under .github/workflows uses the evalgate action",
                    "run `evalgate init`, or copy examples/workflows/evalgate.yml",
                )
            )
        return out
    uploaded: list[str] = []
    wanted: dict[str, str] = {}
    for workflow in workflows:
        out += _check_trigger(workflow)
        out += _check_permissions(workflow)
        out += _check_pins(workflow)
        if loaded is not None:
            out += _check_secrets(workflow, loaded)
            out += _check_tags(workflow, loaded)
        found, names = _check_baseline_upload(workflow)
        out += found
        uploaded += names
        for job in workflow.jobs:
            for step in job.evalgate:
                out += _check_config_input(repo, config_path, workflow, job, step)
                if "pr" in job.roles:
                    name = _with(step).get("baseline_artifact", BASELINE_ARTIFACT)
                    wanted[name] = f"{workflow.rel} job {job.name}"
    roles = {r for w in workflows for j in w.jobs for r in j.roles}
    if "pr" not in roles:
        out.append(
            _warn(
                "workflows",
                "no evalgate job runs on pull requests",
                "trigger on pull_request (see examples/workflows/evalgate.yml)",
            )
        )
    if "baseline" not in roles:
        out.append(
            _warn(
                "workflows",
                f"no evalgate job runs on pushes to the default branch, so there is no "
                f"{BASELINE_ARTIFACT} artefact: every pull request runs the base prompt too "
                "(twice the cost), without a noise floor",
                "add the baseline job of examples/workflows/evalgate.yml",
            )
        )
    if wanted and uploaded:
        for name, where in wanted.items():
            if name not in uploaded:
                out.append(
                    _fail(
                        "workflows: baseline artefact",
                        f"{where} looks for the artefact {name!r}, but the baseline job uploads "
                        f"{', '.join(repr(u) for u in sorted(set(uploaded)))}",
                        "use one name in the upload step's name: and the baseline_artifact input",
                    )
                )
        if all(name in uploaded for name in wanted):
            out.append(
                _ok(
                    "workflows: baseline artefact",
                    f"pull requests read the artefact the baseline job uploads "
                    f"({', '.join(sorted(wanted))})",
                )
            )
    return out


def _check_config_input(
    repo: Path, config_path: Path, workflow: Workflow, job: Job, step: dict[str, Any]
) -> list[Finding]:
    given = _with(step)
    path = repo / given.get("working_directory", ".") / given.get("config", DEFAULT_CONFIG)
    if path.resolve() == config_path.resolve():
        return []
    check = f"workflow {workflow.rel}: config"
    if not path.is_file():
        return [
            _fail(
                check,
                f"job {job.name} reads {_show(path, repo)}, which does not exist",
                "fix the evalgate step's config / working_directory inputs",
            )
        ]
    return [
        _warn(
            check,
            f"job {job.name} reads {_show(path, repo)}, not the config checked here",
            f"check it too: `evalgate doctor --config {_show(path, repo)}`",
        )
    ]


def _check_tags(workflow: Workflow, loaded: LoadedConfig) -> list[Finding]:
    push = workflow.triggers.get("push")
    if not isinstance(push, dict) or not any("release" in j.roles for j in workflow.jobs):
        return []
    tags = push.get("tags")
    if not isinstance(tags, list) or [str(t) for t in tags] == [loaded.config.release_tags]:
        return []
    return [
        _warn(
            f"workflow {workflow.rel}: tags",
            f"the push trigger's tags {tags} differ from release_tags "
            f"{loaded.config.release_tags!r} in evalgate.yml: a tag matching one but not the "
            "other fails the job or is never released",
            "use the same pattern in both",
        )
    ]


def _check_gitignore(repo: Path, state_dir: Path) -> list[Finding]:
    check = "gitignore"
    try:
        rel = state_dir.resolve().relative_to(repo.resolve())
    except ValueError:
        return []
    # A .gitignore in the repository's root or in any folder on the way down to the state dir.
    folders = [repo.resolve().joinpath(*rel.parts[:i]) for i in range(len(rel.parts))]
    for folder in folders:
        ignore = folder / ".gitignore"
        if ignore.is_file():
            lines = ignore.read_text(encoding="utf-8", errors="replace").splitlines()
            if gitignore_covers(lines, state_dir.resolve().relative_to(folder).as_posix()):
                return [_ok(check, f"{rel.as_posix()}/ is ignored by {_show(ignore, repo)}")]
    return [
        _warn(
            check,
            f"{rel.as_posix()}/ is not in .gitignore, so saved runs, the response cache, the "
            "holdout read ledger and downloaded baselines could be committed",
            f"add the line `{STATE_DIR}/` to .gitignore",
        )
    ]


def doctor(repo: Path, config_path: Path, suite: str | None = None) -> DoctorReport:
    """Check a repository's evalgate setup: config, prompts, cases, split, workflows, ignores."""
    findings: list[Finding] = []
    loaded = None
    try:
        loaded = load_config(config_path)
    except UserError as exc:
        findings.append(_from_error("config", exc))
    if loaded is not None:
        names = list(loaded.config.suites)
        findings.append(_ok("config", f"{_show(config_path, repo)} is valid ({', '.join(names)})"))
        try:
            chosen = [loaded.suite(suite)] if suite else list(loaded.config.suites.items())
        except UserError as exc:
            findings.append(_from_error("config", exc))
            chosen = []
        for name, entry in chosen:
            findings += _check_suite(loaded, name, entry)
    findings += _check_workflows(repo, config_path, loaded)
    state_dir = loaded.state_dir if loaded else config_path.parent / STATE_DIR
    findings += _check_gitignore(repo, state_dir)
    counts = Counter(f.status for f in findings)
    return DoctorReport(
        repo=str(repo),
        config=str(config_path),
        findings=findings,
        counts={s: counts.get(s, 0) for s in ("ok", "warn", "FAIL")},
    )


def render_doctor(report: DoctorReport, fmt: str) -> str:
    if fmt == "json":
        return report.model_dump_json(indent=2) + "\n"
    c = report.counts
    tally = f"{c['ok']} ok, {c['warn']} warn, {c['FAIL']} FAIL"
    if fmt == "markdown":
        from evalgate.report.render import md

        lines = [f"### evalgate doctor: {tally}", "", "| status | check | finding | fix |"]
        lines.append("|---|---|---|---|")
        lines += [
            f"| {f.status} | {md(f.check)} | {md(f.message)} | {md(f.fix or '')} |"
            for f in report.findings
        ]
        return "\n".join(lines) + "\n"
    lines = [f"evalgate doctor: {report.repo}"]
    for f in report.findings:
        lines.append(
            f"{f.status:<4}  {f.check}: {f.message}" + (f" (fix: {f.fix})" if f.fix else "")
        )
    after = "; fix the FAIL lines and run it again" if c["FAIL"] else ""
    lines.append(tally + after)
    return "\n".join(lines) + "\n"
