"""promptfoo test cases: a promptfooconfig.yaml (tests inline or in files), or a tests file.

Each test has ``vars`` (the inputs), an ``assert`` list (``type``, ``value``), an optional
``description`` and ``metadata``. ``defaultTest`` is merged into every test as promptfoo's
evaluator merges it (vars and metadata under the test's own, its assertions first unless the
test sets ``options.disableDefaultAsserts``; its description is not inherited). Assertion
values are rendered with the test's vars, as promptfoo renders them, and a var that only
assertions read is no input of the model. ``$ref``s to ``assertionTemplates`` are resolved.

The parts: config.py (the config's settings, prompts, providers, ``$ref``), tests.py (tests
files and CSV), assertions.py (assertion types -> checks), rendering.py (templates).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from evalgate import files
from evalgate.cases.importers import read
from evalgate.cases.importers.core import Draft, Notes, Source
from evalgate.cases.importers.promptfoo import config, rendering
from evalgate.cases.importers.promptfoo.assertions import FIXES, MAPPED, check, parse_assertion
from evalgate.cases.importers.promptfoo.config import PromptfooPrompt
from evalgate.cases.importers.promptfoo.tests import (
    FakeSequence,
    csv_tests,
    referenced,
    resolve,
    starts_with,
)
from evalgate.config import yamlcore
from evalgate.config.load import load_yaml
from evalgate.errors import CaseFileError

__all__ = ["FIXES", "MAPPED", "parse_assertion", "read_promptfoo"]

_TEST_KEYS = {"vars", "assert", "description", "metadata", "options"}


# var files promptfoo runs for their value (the rest it reads as data or text).
SCRIPT_SUFFIXES = (".py", ".js", ".cjs", ".mjs", ".ts")


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path = path
        # Files a config refers to (file://...) must stay in its repository, as evalgate.yml's.
        self.root = files.repository_root(path.parent)
        self.notes = Notes()
        self.files: list[Path] = []
        self.drafts: list[Draft] = []
        # The vars each draft's assertions read (by index of the draft).
        self.assert_vars: list[set[str]] = []
        self.hints: list[str] = []
        self.model: dict[str, Any] | None = None
        self.prompts: list[PromptfooPrompt] = []
        # The config document, which ``$ref`` pointers name.
        self.document_root: Any = None

    # ----------------------------------------------------------------------------- files

    def text(self, file: Path, what: str) -> str:
        """A referenced file's text: inside the repository, read by the one reader."""
        text = files.read_text(file, what, CaseFileError, root=self.root, where=str(self.path))
        self.files.append(file)
        return text

    def document(self, path: Path) -> tuple[Any, yaml.Node | FakeSequence | None]:
        files.contain(path, self.root, "test file", str(self.path), CaseFileError)
        self.files.append(path)
        if path.suffix.lower() == ".json":
            data = read.json_items(path, keys=()) if starts_with(path, "[") else None
            if data is not None:
                return [v for _, v in data], FakeSequence([line for line, _ in data])
            whole = read.json_document(path)
            try:
                node: yaml.Node | None = yamlcore.compose(self.text(path, "test file"))
            except yaml.YAMLError:
                node = None
            return whole, node
        return read.yaml_document(path)

    def load(self, path: Path, default: dict[str, Any], depth: int = 0) -> None:
        if depth > 3:
            raise CaseFileError("tests files refer to each other too deeply", where=str(path))
        files.contain(path, self.root, "tests file", str(self.path), CaseFileError)
        if path.suffix.lower() == ".csv":
            self.files.append(path)
            for line, test in csv_tests(path, self.notes):
                self.test(test, default, f"{path}:{line}", path)
            return
        if path.suffix.lower() == ".jsonl":
            self.files.append(path)
            for line, test in read.jsonl_records(path):
                self.test(test, default, f"{path}:{line}", path)
            return
        data, found = self.document(path)
        if isinstance(data, list):
            self.tests(data, found, path, default, depth)
            return
        node = found if isinstance(found, yaml.Node) else None
        if isinstance(data, dict) and "tests" not in data and "redteam" in data:
            # What `promptfoo redteam init` writes: promptfoo generates its tests later, each
            # graded by a model of promptfoo's (promptfoo:redteam:* assertions).
            raise CaseFileError(
                "a promptfoo red-team config: it has no tests until promptfoo generates them, "
                "and promptfoo's own graders score them",
                where=str(path),
                fix="promptfoo redteam generate writes its tests to redteam.yaml; run them with "
                "promptfoo eval -c redteam.yaml -o results.json and gate the results: evalgate "
                "gate --baseline BASE.json --candidate results.json",
            )
        if not isinstance(data, dict) or "tests" not in data:
            raise CaseFileError(
                "not a promptfoo config (no 'tests') or tests file (a list of tests)",
                where=str(path),
                fix="pass promptfooconfig.yaml or the file its tests: entry names",
            )
        if self.document_root is None:
            self.document_root = data
        default = self.default_test(data.get("defaultTest"), path, read.child(node, "defaultTest"))
        config.config_keys(data, path, self.notes)
        self.model = config.providers(data.get("providers"), self.notes)
        self.read_prompts(data.get("prompts"), path, read.child(node, "prompts"))
        tests = data["tests"]
        tests_node: yaml.Node | FakeSequence | None = read.child(node, "tests")
        if isinstance(tests, str):
            tests = [tests]
            tests_node = FakeSequence([read.node_line(read.child(node, "tests"))])
        if not isinstance(tests, list):
            raise CaseFileError(
                "'tests' must be a list of tests or file references",
                where=f"{path}:{read.node_line(read.child(node, 'tests'))}",
            )
        self.tests(tests, tests_node, path, default, depth)

    def tests(
        self,
        tests: list[Any],
        node: yaml.Node | FakeSequence | None,
        path: Path,
        default: dict[str, Any],
        depth: int,
    ) -> None:
        lines = (
            node.lines if isinstance(node, FakeSequence) else read.sequence_lines(node, len(tests))
        )
        for line, test in zip(lines, tests, strict=True):
            where = f"{path}:{line}"
            if isinstance(test, str):
                found = resolve(test, path, self.root, where)
                if found is None:
                    self.notes.add(
                        f"tests from {test.split('://')[0] if '://' in test else 'code'}",
                        "evalgate reads tests from YAML, JSON, JSONL and CSV files; export "
                        "these tests to one of them",
                        where,
                    )
                    continue
                for file in found:
                    self.load(file, default, depth + 1)
                continue
            self.test(test, default, where, path)

    def default_test(self, value: Any, path: Path, node: yaml.Node | None) -> dict[str, Any]:
        where = f"{path}:{read.node_line(node)}"
        if value is None:
            return {}
        if isinstance(value, str):
            found = resolve(value, path, self.root, where)
            if not found:
                raise CaseFileError("defaultTest must be a test or a file reference", where=where)
            value, _ = self.document(found[0])
        if not isinstance(value, dict):
            raise CaseFileError("defaultTest must be a mapping", where=where)
        for key in value:
            if key not in _TEST_KEYS:
                self.notes.add(f"defaultTest.{key}", "not used by evalgate", where)
        return value

    # ----------------------------------------------------------------------------- advice

    def read_prompts(self, value: Any, path: Path, node: yaml.Node | None) -> None:
        prompts = value if isinstance(value, list) else [value] if value else []
        lines = read.sequence_lines(node, len(prompts)) if isinstance(value, list) else []
        found: list[PromptfooPrompt] = []
        for number, prompt in enumerate(prompts, start=1):
            where = f"{path}:{lines[number - 1]}" if lines else f"{path}:{read.node_line(node)}"
            given = (prompt.get("raw") or prompt.get("id")) if isinstance(prompt, dict) else prompt
            if not isinstance(given, str):
                # promptfoo stops here too ("prompt.raw must be a string"): its text is 'raw'.
                raise CaseFileError(
                    f"prompt {number} has no 'raw' or 'id' (promptfoo reads a prompt's text "
                    "from them)",
                    where=where,
                    fix="write the prompt as text, as {raw: TEXT, label: NAME}, or as a chat "
                    "prompt file: - file://prompt.json holding [{role, content}, ...]",
                )
            # promptfoo reads a prompt that looks like a path as the file it names.
            raw = given if not config.looks_like_path(given) else config.as_file_ref(given)
            if raw.startswith("file://"):
                referenced(raw, path, self.root, where, "prompt file")
            found += config.prompt_entries(raw, path, self.notes, self.text)
        if not found:
            return
        first = found[0]
        if first.system is not None:
            self.hints.append(
                "promptfoo's chat prompt has a system message: in evalgate it is the prompt "
                "file (the part a pull request changes). Save it as prompts/v1.txt:\n"
                f"{first.system}"
            )
            self.hints.append(
                "Its user turn is the suite's `template` (the snippet uses it when its vars "
                f"are the cases' inputs):\n{first.user}"
            )
        else:
            self.hints.append(
                "promptfoo sends the prompt below as the user turn, vars filled in. In evalgate "
                "the prompt file is the system prompt (the part a pull request changes) and "
                "`template` is the user turn: put the instructions into prompts/v1.txt and keep "
                f"the vars in the template.\n{first.user}"
            )
        self.prompts = found
        if len(found) > 1:
            self.notes.add(
                "several prompts",
                "promptfoo compares prompts side by side; in evalgate each is a version: save "
                "them as prompts/v1.txt, prompts/v2.txt and compare runs",
                count=len(found) - 1,
            )

    # ----------------------------------------------------------------------------- tests

    def test(self, test: Any, default: dict[str, Any], where: str, base: Path) -> None:
        if not isinstance(test, dict):
            raise CaseFileError(
                f"a test must be a mapping, found {type(test).__name__}",
                where=where,
                fix="write each test as {vars: {...}, assert: [...]}",
            )
        for key in test:
            if key not in _TEST_KEYS:
                self.notes.add(f"test key {key!r}", "not used by evalgate", where)
        values: dict[Any, Any] = {}
        metadata: dict[str, Any] = {}
        for scope in (default, test):
            given = scope.get("vars") or {}
            given_metadata = scope.get("metadata") or {}
            if not isinstance(given, dict):
                raise CaseFileError("'vars' must be a mapping of names to values", where=where)
            if not isinstance(given_metadata, dict):
                raise CaseFileError("'metadata' must be a mapping", where=where)
            values.update(given)
            metadata.update(given_metadata)
        inputs = {str(k): self.var(str(k), v, base, where) for k, v in values.items()}
        options = test.get("options") or {}
        # promptfoo: a test's own assertions follow defaultTest's, unless it disables those.
        own_only = isinstance(options, dict) and options.get("disableDefaultAsserts") is True
        asserts: list[Any] = []
        for scope in (test,) if own_only else (default, test):
            given_asserts = scope.get("assert") or []
            if not isinstance(given_asserts, list):
                raise CaseFileError("'assert' must be a list of assertions", where=where)
            asserts += given_asserts
        checks = []
        read_vars: set[str] = set()
        for assertion in asserts:
            resolved = config.dereference(assertion, self.document_root or {}, where)
            if not isinstance(resolved, dict) or not isinstance(resolved.get("type"), str):
                raise CaseFileError(
                    "each assertion needs a 'type'",
                    where=where,
                    fix="write assertions as {type: icontains, value: ...}",
                )
            raw_value = resolved.get("value")
            read_vars |= rendering.value_names(raw_value)
            value = rendering.render_value(self.file_value(raw_value, base), inputs, where)
            checks.append(check(resolved, value, where, self.notes))
        # The test's own vars, not defaultTest's: editing a shared var keeps the ids.
        identity = {str(k): inputs[str(k)] for k in test.get("vars") or {}} or None
        # A var still a file:// reference is one evalgate did not read: promptfoo runs a
        # script's (.py, .js) or loads a data file's value. Sending the path and scoring the
        # reply would be a guess: the case is kept out of scoring, and says why. One that no
        # prompt and no assertion value reads changes nothing promptfoo sends: it is left out.
        files_vars = {
            name: value
            for name, value in inputs.items()
            if isinstance(value, str) and value.startswith("file://")
        }
        asked = self.prompt_names()
        for name in list(files_vars):
            if asked is not None and name not in asked and name not in read_vars:
                self.notes.add(
                    f"var {name!r} that no prompt reads",
                    f"left out: promptfoo computes it from {files_vars.pop(name)}, but no "
                    "prompt sends it",
                    where,
                )
                del inputs[name]
        unread = [
            f"var {name!r} is computed by {value}, which evalgate does not run"
            if value.lower().endswith(SCRIPT_SUFFIXES)
            else f"var {name!r} is read from {value}, which evalgate does not read"
            for name, value in files_vars.items()
        ]
        extra: dict[str, Any] = {}
        if test.get("description") is not None:
            extra["description"] = str(test["description"])
        rest = {k: v for k, v in metadata.items() if k not in ("group", "category", "split")}
        if rest:
            extra["metadata"] = rest
        for key in ("group", "category", "split"):
            if key in metadata:
                self.notes.map(f"metadata.{key}", key)
        self.drafts.append(
            Draft(
                where=where,
                source_id=None,
                inputs=inputs,
                checks=checks,
                group=metadata.get("group"),
                category=metadata.get("category"),
                split=metadata.get("split"),
                extra=extra,
                identity=identity,
                withheld=unread[0] if unread else None,
            )
        )
        self.assert_vars.append(read_vars)

    def var(self, name: str, value: Any, base: Path, where: str) -> Any:
        if isinstance(value, dict):
            raise CaseFileError(
                f"var {name!r} is an object; promptfoo renders it as '[object Object]'",
                where=where,
                fix="write the value as text (JSON inside a string, if the prompt wants JSON)",
            )
        if isinstance(value, list):
            self.notes.add(
                "var with a list of values",
                "promptfoo runs one test per value; evalgate keeps the list as one input "
                "(write one test per value to match)",
                where,
            )
        if isinstance(value, str) and value.startswith("file://"):
            file = referenced(value, base, self.root, where, "var file")
            if file.suffix.lower() in (".txt", ".md") and file.is_file():
                # promptfoo trims a var file's text.
                return self.text(file, "var file").strip()
            self.notes.add(
                "var read from a file",
                "only .txt and .md files are read; paste the value into the test",
                where,
            )
        return value

    def file_value(self, value: Any, base: Path) -> Any:
        """An assertion value read from its file (text, or JSON / YAML data), not rendered."""
        if not (isinstance(value, str) and value.startswith("file://")):
            return value
        file = referenced(value, base, self.root, str(base), "assertion file")
        if not file.is_file():
            return value
        suffix = file.suffix.lower()
        if suffix in (".txt", ".md"):
            return self.text(file, "assertion file")
        if suffix in (".json", ".yaml", ".yml"):
            return load_yaml(self.text(file, "assertion file"), file, CaseFileError)
        return value

    # ----------------------------------------------------------------------------- inputs

    def prompt_names(self) -> set[str] | None:
        """The vars the config's prompts read; None when that is not known (no prompts, or one
        evalgate could not read or cannot tell the vars of)."""
        if not self.prompts:
            return None
        found: set[str] = set()
        for prompt in self.prompts:
            if prompt.user.startswith("file://"):
                return None
            for text in (prompt.user, prompt.system or ""):
                names = rendering.names(text)
                if names is None:
                    return None
                found |= names
        return found

    def keep_model_inputs(self) -> None:
        """Drop from each test's inputs the vars only its assertions read: promptfoo renders
        them into the expected answer, and no prompt sends them."""
        prompt_vars: set[str] = set()
        for prompt in self.prompts:
            for text in (prompt.user, prompt.system or ""):
                prompt_vars |= rendering.names(text) or set()
        for draft, read_vars in zip(self.drafts, self.assert_vars, strict=True):
            dropped = {n for n in read_vars if n in draft.inputs and n not in prompt_vars}
            if not self.prompts and dropped == set(draft.inputs):
                dropped = set()  # no prompt to tell by: the only vars are the inputs
            for name in dropped:
                del draft.inputs[name]
                self.notes.map(f"vars.{name}", "the expected answer (read by assertions only)")
            for name in draft.inputs:
                self.notes.map(f"vars.{name}", f"input field {name}")


def read_promptfoo(path: Path) -> Source:
    reader = _Reader(path)
    reader.load(path, {})
    reader.keep_model_inputs()
    drafts = reader.drafts
    if not drafts:
        raise CaseFileError("no tests found", where=str(path), fix="add tests to the config")
    if len(drafts) > 1:
        for name in drafts[0].inputs:
            values = {json.dumps(d.inputs.get(name), sort_keys=True, default=str) for d in drafts}
            if len(values) == 1:
                reader.notes.add(
                    f"var {name!r} is the same in every test",
                    "it is part of the instructions: write its value into prompts/v1.txt and "
                    "drop it from fields.input and the template",
                )
    first = reader.prompts[0] if reader.prompts else None
    return Source(
        format="promptfoo",
        path=path,
        noun="tests",
        drafts=drafts,
        notes=reader.notes,
        files=list(dict.fromkeys(reader.files)),
        read=len(drafts),
        id_prefix="pf",
        hints=reader.hints,
        model=reader.model,
        # A chat prompt's user turn is a template already; a plain prompt holds instructions too.
        user_turn=first.user if first and first.system is not None else None,
    )
