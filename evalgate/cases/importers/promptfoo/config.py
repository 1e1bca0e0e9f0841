"""A promptfoo config: its settings (what maps, what is noted), its prompts and providers as
advice for evalgate.yml, and ``$ref``s to its ``assertionTemplates``, resolved as promptfoo's
JSON-reference dereferencing resolves them (a local ``#/...`` pointer into the config)."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from evalgate import globs
from evalgate.cases.importers.core import Notes
from evalgate.config import yamlcore
from evalgate.errors import CaseFileError

# promptfoo splits a prompt text file into several prompts at lines of three dashes.
_SEPARATOR = re.compile(r"^---[ \t]*$", re.MULTILINE)
_REF_DEPTH = 32
# promptfoo 0.121.20's VALID_FILE_EXTENSIONS (src/prompts/constants.ts).
_FILE_EXTENSIONS = (
    ".cjs",
    ".cts",
    ".js",
    ".json",
    ".jsonl",
    ".mjs",
    ".mts",
    ".py",
    ".ts",
    ".txt",
    ".yml",
    ".yaml",
)
_GLOB = re.compile(r"[*?[]")


@dataclass(frozen=True)
class PromptfooPrompt:
    """One of the config's prompts: its system message (chat prompts) and its user turn."""

    system: str | None
    user: str


# Settings of a promptfoo run that say nothing about the cases.
RUN_KEYS = {
    "description",
    "prompts",
    "providers",
    "tests",
    "defaultTest",
    "evaluateOptions",
    "outputPath",
    "sharing",
    "tags",
    "env",
    "nunjucksFilters",
    "commandLineOptions",
    "writeLatestResults",
    "extensions",
    "metadata",
    # Assertions that tests name with $ref (resolved where they are named).
    "assertionTemplates",
}


def dereference(value: Any, root: Any, where: str, depth: int = 0) -> Any:
    """``value`` with every ``{$ref: '#/a/b'}`` replaced by what the pointer names in ``root``
    (keys beside ``$ref`` laid over it); a pointer that names nothing is an error."""
    if depth > _REF_DEPTH:
        raise CaseFileError("$ref refers to itself (or nests over 32 deep)", where=where)
    if isinstance(value, list):
        return [dereference(v, root, where, depth) for v in value]
    if not isinstance(value, dict):
        return value
    if "$ref" in value:
        ref = value["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise CaseFileError(
                f"$ref {ref!r} is not a pointer into this config",
                where=where,
                fix="name an entry of the config, e.g. $ref: '#/assertionTemplates/NAME'",
            )
        target: Any = root
        for part in ref[2:].split("/"):
            key = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and key in target:
                target = target[key]
            elif isinstance(target, list) and key.isdigit() and int(key) < len(target):
                target = target[int(key)]
            else:
                raise CaseFileError(
                    f"$ref {ref!r} names nothing in the config",
                    where=where,
                    fix="define it under assertionTemplates (or fix the pointer)",
                )
        resolved = dereference(copy.deepcopy(target), root, where, depth + 1)
        rest = {k: v for k, v in value.items() if k != "$ref"}
        if rest and isinstance(resolved, dict):
            return {**resolved, **dereference(rest, root, where, depth)}
        return resolved
    return {k: dereference(v, root, where, depth) for k, v in value.items()}


def config_keys(data: dict[str, Any], path: Path, notes: Notes) -> None:
    if "scenarios" in data:
        notes.add(
            "scenarios",
            "promptfoo crosses scenario configs with tests; expand them into tests first",
            str(path),
        )
    for key in data:
        if key not in RUN_KEYS and key != "scenarios":
            notes.add(f"config key {key!r}", "not used by evalgate", str(path))


def providers(value: Any, notes: Notes) -> dict[str, Any] | None:
    """The model evalgate.yml's snippet uses: the first provider's, when it has a backend."""
    listed = value if isinstance(value, list) else [value] if value else []
    if not listed:
        return None
    if len(listed) > 1:
        notes.add(
            "several providers",
            "an evalgate suite gates one model; the snippet uses the first (a second suite "
            "can gate another)",
            count=len(listed) - 1,
        )
    first = listed[0]
    ident = first.get("id") if isinstance(first, dict) else first
    options = first.get("config", {}) if isinstance(first, dict) else {}
    options = options if isinstance(options, dict) else {}
    model = _model_of(str(ident), options)
    # What promptfoo sends with every call beside the prompt and the snippet's model leaves out.
    for key in options:
        if model is not None and key in _CARRIED and key in model:
            continue
        notes.add(
            f"provider config {key!r}",
            "promptfoo sends it with every call and the snippet's model does not: give the "
            "suite its tools: (docs/agents.md)"
            if key in ("tools", "functions")
            else "promptfoo sends it with every call and the snippet's model does not: see "
            "docs/backends.md for what a backend's model.options take",
        )
    if model is None:
        notes.add(
            f"provider {ident!r}",
            "no evalgate backend of that name: use backend anthropic or openai, or the "
            "command backend to call your own code",
        )
    return model


def looks_like_path(raw: str) -> bool:
    """Whether promptfoo reads the prompt ``raw`` as a file (its maybeFilePath, in promptfoo
    0.121.20's src/prompts/utils.ts): file://, a known extension (before a ``:function``
    too), a dot three or four from the end, or a ``*``, ``/`` or ``\\``; never text of several
    lines or another scheme's reference."""
    if "\n" in raw or any(s in raw for s in ("portkey://", "langfuse://", "helicone://")):
        return False
    tokens = raw.split(":")
    last = tokens[-1]
    before = tokens[-2] if len(tokens) > 1 else ""
    return (
        raw.startswith("file://")
        or any(last.endswith(ext) or before.endswith(ext) for ext in _FILE_EXTENSIONS)
        or raw[-3:-2] == "."
        or raw[-4:-3] == "."
        or any(c in raw for c in "*/\\")
    )


def as_file_ref(raw: str) -> str:
    return raw if raw.startswith("file://") else f"file://{raw}"


def prompt_entries(raw: str, path: Path, notes: Notes, read_file: Any) -> list[PromptfooPrompt]:
    """The prompts one ``prompts:`` entry holds: a text file's ``---``-separated prompts,
    a chat prompt (a JSON or YAML list of messages, in a file or inline), or the text.
    ``read_file(path, what)`` reads a referenced file (inside the repository)."""
    text = raw
    where = str(path)
    if raw.startswith("file://") and _GLOB.search(raw):
        # promptfoo reads each file a glob matches, in order.
        matched = globs.expand(path.parent, raw[len("file://") :], globs.MAX_MATCHES)
        if not matched:
            notes.add(
                f"prompt file {raw!r}",
                "matches no file beside the config: copy the prompt into prompts/v1.txt by hand",
            )
            return [PromptfooPrompt(None, raw)]
        found: list[PromptfooPrompt] = []
        for file in matched:
            relative = file.relative_to(path.parent).as_posix()
            found += prompt_entries(f"file://{relative}", path, notes, read_file)
        return found
    if raw.startswith("file://"):
        file = path.parent / raw[len("file://") :]
        if not file.is_file():
            notes.add(
                f"prompt file {raw!r}",
                "not found beside the config: copy the prompt into prompts/v1.txt by hand",
            )
            return [PromptfooPrompt(None, raw)]
        text = read_file(file, "prompt file")
        where = str(file)
        if file.suffix.lower() in (".json", ".yaml", ".yml"):
            return [chat_prompt(text, where, raw, notes)]
        if file.suffix.lower() not in (".txt", ".md", ".j2", ".njk", ".prompt"):
            notes.add(
                f"prompt file {raw!r}",
                "a prompt made by code (.js, .py) cannot be read: write what it returns "
                "into prompts/v1.txt",
            )
            return [PromptfooPrompt(None, raw)]
        # promptfoo reads a text file as several prompts separated by lines of ---.
        parts = [part.strip() for part in _SEPARATOR.split(text)]
        return [PromptfooPrompt(None, part) for part in parts if part]
    if text.lstrip().startswith("[") and '"role"' in text:
        return [chat_prompt(text, where, raw, notes)]
    return [PromptfooPrompt(None, text.strip())]


def chat_prompt(text: str, where: str, raw: str, notes: Notes) -> PromptfooPrompt:
    try:
        messages = yamlcore.load(text)
    except yaml.YAMLError:
        messages = None
    if not (
        isinstance(messages, list)
        and messages
        and all(isinstance(m, dict) and "role" in m and "content" in m for m in messages)
    ):
        raise CaseFileError(
            f"prompt {raw!r} is not a chat prompt (a list of {{role, content}} messages)",
            where=where,
            fix='write it as [{"role": "system", "content": "..."}, {"role": "user", ...}]',
        )
    system = "\n\n".join(
        str(m["content"]) for m in messages if m["role"] in ("system", "developer")
    )
    users = [str(m["content"]) for m in messages if m["role"] == "user"]
    others = [m for m in messages if m["role"] not in ("system", "developer", "user")]
    if others or len(users) > 1:
        notes.add(
            "chat prompt with several turns",
            "evalgate sends one user turn: the last user message is the template; put the "
            "earlier turns into it or into the system prompt",
        )
    return PromptfooPrompt(system or None, users[-1] if users else "")


# The provider config keys the snippet's model carries (_model_of).
_CARRIED = ("max_tokens", "temperature")


def _model_of(ident: str, options: dict[str, Any]) -> dict[str, Any] | None:
    parts = ident.split(":")
    if parts[0] not in ("anthropic", "openai") or len(parts) < 2:
        return None
    model: dict[str, Any] = {"backend": parts[0], "name": parts[-1]}
    if isinstance(options.get("max_tokens"), int):
        model["max_tokens"] = options["max_tokens"]
    if isinstance(options.get("temperature"), int | float):
        model["temperature"] = options["temperature"]
    return model
