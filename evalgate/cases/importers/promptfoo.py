"""promptfoo test cases: a promptfooconfig.yaml (tests inline or in files), or a tests file.

Each test has ``vars`` (the inputs), an ``assert`` list (``type``, ``value``), an optional
``description`` and ``metadata``. ``defaultTest`` is merged into every test, as promptfoo does.
Tests files may be YAML, JSON, JSONL or CSV (``__expected`` columns hold assertions).
"""

from __future__ import annotations

import glob
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from evalgate import files
from evalgate.cases.importers import read
from evalgate.cases.importers.core import Check, Draft, Notes, Source
from evalgate.config.load import load_yaml
from evalgate.errors import CaseFileError

# promptfoo splits a prompt text file into several prompts at lines of three dashes.
_SEPARATOR = re.compile(r"^---[ \t]*$", re.MULTILINE)


@dataclass(frozen=True)
class PromptfooPrompt:
    """One of the config's prompts: its system message (chat prompts) and its user turn."""

    system: str | None
    user: str


# promptfoo assertion type -> (evalgate scorer kind, case-sensitive).
MAPPED: dict[str, tuple[str, bool]] = {
    "equals": ("exact", True),
    "contains": ("contains", True),
    "icontains": ("contains", False),
    "contains-all": ("contains", True),
    "icontains-all": ("contains", False),
    "regex": ("regex", True),
    "starts-with": ("regex", True),
    "is-json": ("json_schema", True),
    "llm-rubric": ("judge", True),
}
# Every documented assertion type, so a CSV cell "contains: x" is told from a plain answer.
KNOWN = set(MAPPED) | {
    "contains-any",
    "icontains-any",
    "contains-json",
    "is-html",
    "contains-html",
    "is-sql",
    "contains-sql",
    "is-xml",
    "contains-xml",
    "is-valid-openai-function-call",
    "is-valid-openai-tools-call",
    "is-valid-function-call",
    "tool-call-f1",
    "javascript",
    "python",
    "webhook",
    "rouge-n",
    "bleu",
    "gleu",
    "meteor",
    "levenshtein",
    "latency",
    "cost",
    "perplexity",
    "perplexity-score",
    "answer-relevance",
    "context-faithfulness",
    "context-recall",
    "context-relevance",
    "factuality",
    "model-graded-closedqa",
    "model-graded-factuality",
    "g-eval",
    "similar",
    "classifier",
    "moderation",
    "finish-reason",
    "select-best",
    "max-score",
    "guardrails",
    "word-count",
    "f-score",
    "search-rubric",
    "pi",
    "assert-set",
    "trace-span-count",
    "trace-span-duration",
}
_CODE = "port the check to a python scorer (scorer: {kind: python, function: module:function})"
_MODEL_GRADED = "use the judge scorer (kind: judge) with a rubric that says what it checked"
_RUN_METRIC = "evalgate reports cost, latency and truncated replies per run; no per-case check"
FIXES: dict[str, str] = {
    "javascript": _CODE,
    "python": _CODE,
    "webhook": _CODE,
    "contains-any": "any-of matching: use scorer regex with the expected answer a|b",
    "icontains-any": "any-of matching: use scorer regex (ignore_case) with expected a|b",
    "similar": "no similarity scorer: use a judge with a rubric, or a python scorer",
    "levenshtein": "no similarity scorer: use a judge with a rubric, or a python scorer",
    "rouge-n": "no similarity scorer: use a judge with a rubric, or a python scorer",
    "bleu": "no similarity scorer: use a judge with a rubric, or a python scorer",
    "gleu": "no similarity scorer: use a judge with a rubric, or a python scorer",
    "meteor": "no similarity scorer: use a judge with a rubric, or a python scorer",
    "factuality": _MODEL_GRADED,
    "model-graded-closedqa": _MODEL_GRADED,
    "model-graded-factuality": _MODEL_GRADED,
    "g-eval": _MODEL_GRADED,
    "answer-relevance": _MODEL_GRADED,
    "search-rubric": _MODEL_GRADED,
    "cost": _RUN_METRIC,
    "latency": _RUN_METRIC,
    "finish-reason": _RUN_METRIC,
    "perplexity": _RUN_METRIC,
    "perplexity-score": _RUN_METRIC,
    "contains-json": "use scorer json_schema (the whole reply must be JSON), or a python scorer",
}
_NOT_FIX = "a negated check has no evalgate scorer: " + _CODE
_OTHER_FIX = "no evalgate scorer does this: " + _CODE
_CSV_ASSERT = re.compile(r"^(not-)?([a-z][a-z0-9-]*)(?:\(([0-9.]+)\))?(?::\s*(.*))?$", re.S)
_TEST_KEYS = {"vars", "assert", "description", "metadata"}
_ASSERT_KEYS = {"type", "value", "description"}
# Settings of a promptfoo run that say nothing about the cases.
_RUN_KEYS = {
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
}
_OPTION_FIXES = {
    "threshold": "ignored: each case scores 0..1 and the gate compares two runs case by case",
    "provider": "ignored: the judge's model is scorer.model in evalgate.yml",
    "weight": "ignored: every case counts once",
    "metric": "ignored: per-category tables come from metadata.category",
}


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path = path
        # Files a config refers to (file://...) must stay in its repository, as evalgate.yml's.
        self.root = files.repository_root(path.parent)
        self.notes = Notes()
        self.files: list[Path] = []
        self.drafts: list[Draft] = []
        self.hints: list[str] = []
        self.model: dict[str, Any] | None = None
        self.first_prompt: PromptfooPrompt | None = None

    # ----------------------------------------------------------------------------- files

    def text(self, file: Path, what: str) -> str:
        """A referenced file's text: inside the repository, read by the one reader."""
        files.contain(file, self.root, what, str(self.path), CaseFileError)
        return files.read_text(file, what, CaseFileError)

    def document(self, path: Path) -> tuple[Any, yaml.Node | _FakeSequence | None]:
        files.contain(path, self.root, "test file", str(self.path), CaseFileError)
        self.files.append(path)
        if path.suffix.lower() == ".json":
            data = read.json_items(path, keys=()) if _starts_with(path, "[") else None
            if data is not None:
                return [v for _, v in data], _FakeSequence([line for line, _ in data])
            whole = read.json_document(path)
            try:
                node: yaml.Node | None = yaml.compose(
                    self.text(path, "test file"), Loader=yaml.SafeLoader
                )
            except yaml.YAMLError:
                node = None
            return whole, node
        return read.yaml_document(path)

    def resolve(self, ref: str, base: Path, where: str) -> list[Path] | None:
        """Files a test reference names (file://, globs); None when it is not a file."""
        target = ref[len("file://") :] if ref.startswith("file://") else ref
        if "://" in target or not re.search(r"\.(ya?ml|json|jsonl|csv)$", target, re.I):
            return None
        pattern = target if Path(target).is_absolute() else str(base.parent / target)
        found = sorted(Path(p) for p in glob.glob(pattern, recursive=True))
        if not found:
            raise CaseFileError(
                f"tests file {ref!r} matches no file",
                where=where,
                fix=f"paths are relative to {base.parent}",
            )
        return found

    def load(self, path: Path, default: dict[str, Any], depth: int = 0) -> None:
        if depth > 3:
            raise CaseFileError("tests files refer to each other too deeply", where=str(path))
        if path.suffix.lower() == ".csv":
            self.files.append(path)
            for line, test in _csv_tests(path, self.notes):
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
        if not isinstance(data, dict) or "tests" not in data:
            raise CaseFileError(
                "not a promptfoo config (no 'tests') or tests file (a list of tests)",
                where=str(path),
                fix="pass promptfooconfig.yaml or the file its tests: entry names",
            )
        default = self.default_test(data.get("defaultTest"), path, read.child(node, "defaultTest"))
        self.config_keys(data, path)
        self.providers(data.get("providers"))
        self.prompts(data.get("prompts"), path)
        tests = data["tests"]
        tests_node: yaml.Node | _FakeSequence | None = read.child(node, "tests")
        if isinstance(tests, str):
            tests = [tests]
            tests_node = _FakeSequence([read.node_line(read.child(node, "tests"))])
        if not isinstance(tests, list):
            raise CaseFileError(
                "'tests' must be a list of tests or file references",
                where=f"{path}:{read.node_line(read.child(node, 'tests'))}",
            )
        self.tests(tests, tests_node, path, default, depth)

    def tests(
        self,
        tests: list[Any],
        node: yaml.Node | _FakeSequence | None,
        path: Path,
        default: dict[str, Any],
        depth: int,
    ) -> None:
        lines = (
            node.lines if isinstance(node, _FakeSequence) else read.sequence_lines(node, len(tests))
        )
        for line, test in zip(lines, tests, strict=True):
            where = f"{path}:{line}"
            if isinstance(test, str):
                files = self.resolve(test, path, where)
                if files is None:
                    self.notes.add(
                        f"tests from {test.split('://')[0] if '://' in test else 'code'}",
                        "evalgate reads tests from YAML, JSON, JSONL and CSV files; export "
                        "these tests to one of them",
                        where,
                    )
                    continue
                for file in files:
                    self.load(file, default, depth + 1)
                continue
            self.test(test, default, where, path)

    def default_test(self, value: Any, path: Path, node: yaml.Node | None) -> dict[str, Any]:
        where = f"{path}:{read.node_line(node)}"
        if value is None:
            return {}
        if isinstance(value, str):
            files = self.resolve(value, path, where)
            if not files:
                raise CaseFileError("defaultTest must be a test or a file reference", where=where)
            value, _ = self.document(files[0])
        if not isinstance(value, dict):
            raise CaseFileError("defaultTest must be a mapping", where=where)
        for key in value:
            if key not in _TEST_KEYS and key != "options":
                self.notes.add(f"defaultTest.{key}", "not used by evalgate", where)
        return value

    def config_keys(self, data: dict[str, Any], path: Path) -> None:
        if "scenarios" in data:
            self.notes.add(
                "scenarios",
                "promptfoo crosses scenario configs with tests; expand them into tests first",
                str(path),
            )
        for key in data:
            if key not in _RUN_KEYS and key != "scenarios":
                self.notes.add(f"config key {key!r}", "not used by evalgate", str(path))

    # ----------------------------------------------------------------------------- advice

    def providers(self, value: Any) -> None:
        providers = value if isinstance(value, list) else [value] if value else []
        if not providers:
            return
        if len(providers) > 1:
            self.notes.add(
                "several providers",
                "an evalgate suite gates one model; the snippet uses the first (a second suite "
                "can gate another)",
                count=len(providers) - 1,
            )
        first = providers[0]
        ident = first.get("id") if isinstance(first, dict) else first
        options = first.get("config", {}) if isinstance(first, dict) else {}
        model = _model_of(str(ident), options if isinstance(options, dict) else {})
        if model is None:
            self.notes.add(
                f"provider {ident!r}",
                "no evalgate backend of that name: use backend anthropic or openai, or the "
                "command backend to call your own code",
            )
        self.model = model

    def prompts(self, value: Any, path: Path) -> None:
        prompts = value if isinstance(value, list) else [value] if value else []
        found: list[PromptfooPrompt] = []
        for prompt in prompts:
            raw = str(
                (prompt.get("raw") or prompt.get("id")) if isinstance(prompt, dict) else prompt
            )
            found += self._prompt(raw, path)
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
        self.first_prompt = first
        if len(found) > 1:
            self.notes.add(
                "several prompts",
                "promptfoo compares prompts side by side; in evalgate each is a version: save "
                "them as prompts/v1.txt, prompts/v2.txt and compare runs",
                count=len(found) - 1,
            )

    def _prompt(self, raw: str, path: Path) -> list[PromptfooPrompt]:
        """The prompts one ``prompts:`` entry holds: a text file's ``---``-separated prompts,
        a chat prompt (a JSON or YAML list of messages, in a file or inline), or the text."""
        text = raw
        where = str(path)
        if raw.startswith("file://"):
            file = path.parent / raw[len("file://") :]
            if not file.is_file():
                self.notes.add(
                    f"prompt file {raw!r}",
                    "not found beside the config: copy the prompt into prompts/v1.txt by hand",
                )
                return [PromptfooPrompt(None, raw)]
            text = file.read_text(encoding="utf-8")
            where = str(file)
            if file.suffix.lower() in (".json", ".yaml", ".yml"):
                return [self._chat(text, where, raw)]
            if file.suffix.lower() not in (".txt", ".md", ".j2", ".njk", ".prompt"):
                self.notes.add(
                    f"prompt file {raw!r}",
                    "a prompt made by code (.js, .py) cannot be read: write what it returns "
                    "into prompts/v1.txt",
                )
                return [PromptfooPrompt(None, raw)]
            # promptfoo reads a text file as several prompts separated by lines of ---.
            parts = [part.strip() for part in _SEPARATOR.split(text)]
            return [PromptfooPrompt(None, part) for part in parts if part]
        if text.lstrip().startswith("[") and '"role"' in text:
            return [self._chat(text, where, raw)]
        return [PromptfooPrompt(None, text.strip())]

    def _chat(self, text: str, where: str, raw: str) -> PromptfooPrompt:
        try:
            messages = yaml.safe_load(text)
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
            self.notes.add(
                "chat prompt with several turns",
                "evalgate sends one user turn: the last user message is the template; put the "
                "earlier turns into it or into the system prompt",
            )
        return PromptfooPrompt(system or None, users[-1] if users else "")

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
        for scope in (default, test):
            given = scope.get("vars") or {}
            if not isinstance(given, dict):
                raise CaseFileError("'vars' must be a mapping of names to values", where=where)
            values.update(given)
        inputs = {str(k): self.var(v, base, where) for k, v in values.items()}
        asserts: list[Any] = []
        metadata: dict[str, Any] = {}
        for scope in (default, test):
            given_asserts = scope.get("assert") or []
            given_metadata = scope.get("metadata") or {}
            if not isinstance(given_asserts, list):
                raise CaseFileError("'assert' must be a list of assertions", where=where)
            if not isinstance(given_metadata, dict):
                raise CaseFileError("'metadata' must be a mapping", where=where)
            asserts += given_asserts
            metadata.update(given_metadata)
        checks = [self.check(a, where, base) for a in asserts]
        extra: dict[str, Any] = {}
        if test.get("description") is not None:
            extra["description"] = str(test["description"])
        rest = {k: v for k, v in metadata.items() if k not in ("group", "category", "split")}
        if rest:
            extra["metadata"] = rest
        for key in ("group", "category", "split"):
            if key in metadata:
                self.notes.map(f"metadata.{key}", key)
        for name in inputs:
            self.notes.map(f"vars.{name}", f"input field {name}")
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
                # The test's own vars, not defaultTest's: editing a shared var keeps the ids.
                identity={str(k): inputs[str(k)] for k in test.get("vars") or {}} or None,
            )
        )

    def var(self, value: Any, base: Path, where: str) -> Any:
        if isinstance(value, list):
            self.notes.add(
                "var with a list of values",
                "promptfoo runs one test per value; evalgate keeps the list as one input "
                "(write one test per value to match)",
                where,
            )
        if isinstance(value, str) and value.startswith("file://"):
            file = base.parent / value[len("file://") :]
            if file.suffix.lower() in (".txt", ".md") and file.is_file():
                text = self.text(file, "var file")
                self.files.append(file)
                return text
            self.notes.add(
                "var read from a file",
                "only .txt and .md files are read; paste the value into the test",
                where,
            )
        return value

    def check(self, assertion: Any, where: str, base: Path) -> Check:
        if not isinstance(assertion, dict) or not isinstance(assertion.get("type"), str):
            raise CaseFileError(
                "each assertion needs a 'type'",
                where=where,
                fix="write assertions as {type: icontains, value: ...}",
            )
        kind = assertion["type"]
        value = _file_value(assertion.get("value"), base, self)
        mapped = MAPPED.get(kind)
        for key in assertion:
            if key not in _ASSERT_KEYS and mapped is not None:
                fix = _OPTION_FIXES.get(key, "not used by evalgate")
                self.notes.add(f"assertion option {key!r}", fix, where)
        if mapped is None:
            fix = _NOT_FIX if kind.startswith("not-") else FIXES.get(kind, _OTHER_FIX)
            self.notes.add(f"{kind} assertion", fix, where)
            return Check(kind, None, value, raw=assertion)
        family, sensitive = mapped
        if kind.endswith("contains-all"):
            value = [v.strip() for v in value.split(",")] if isinstance(value, str) else value
        elif kind == "starts-with":
            value = "^" + re.escape(str(value))
        elif kind == "equals" and not isinstance(value, str):
            value = json.dumps(value) if isinstance(value, dict | list) else str(value)
        elif kind == "is-json" and value is not None and not isinstance(value, dict):
            value = _schema(value, where)
        return Check(kind, family, value, sensitive, raw=assertion)


class _FakeSequence:
    """Lines of the items of a sequence that has no YAML node (JSON arrays, one reference)."""

    def __init__(self, lines: list[int]) -> None:
        self.lines = lines


def _starts_with(path: Path, char: str) -> bool:
    return read.read_bytes(path).lstrip().startswith(char.encode())


def _schema(value: Any, where: str) -> Any:
    if isinstance(value, str):
        try:
            return yaml.safe_load(value)
        except yaml.YAMLError:
            pass
    raise CaseFileError("is-json's value must be a JSON schema", where=where)


def _file_value(value: Any, base: Path, reader: _Reader) -> Any:
    if not (isinstance(value, str) and value.startswith("file://")):
        return value
    file = base.parent / value[len("file://") :]
    if not file.is_file():
        return value
    suffix = file.suffix.lower()
    if suffix in (".txt", ".md"):
        text = reader.text(file, "assertion file")
        reader.files.append(file)
        return text
    if suffix in (".json", ".yaml", ".yml"):
        text = reader.text(file, "assertion file")
        reader.files.append(file)
        return load_yaml(text, file, CaseFileError)
    return value


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


def parse_assertion(text: str) -> dict[str, Any] | None:
    """A CSV ``__expected`` cell as promptfoo reads it: ``type: value``, else an equals check."""
    text = text.strip()
    if not text:
        return None
    for legacy, kind in (("fn:", "javascript"), ("eval:", "javascript"), ("grade:", "llm-rubric")):
        if text.startswith(legacy):
            return {"type": kind, "value": text[len(legacy) :].strip()}
    match = _CSV_ASSERT.match(text)
    if match and match.group(2) in KNOWN:
        negated, kind, threshold, value = match.groups()
        assertion: dict[str, Any] = {"type": (negated or "") + kind}
        if value is not None:
            assertion["value"] = value.strip()
        if threshold is not None:
            assertion["threshold"] = float(threshold)
        return assertion
    return {"type": "equals", "value": text}


def _csv_tests(path: Path, notes: Notes) -> list[tuple[int, dict[str, Any]]]:
    header, rows = read.csv_rows(path)
    for name in header:
        special = name.startswith("__") and not re.match(
            r"^__(expected\d*|description|metadata(:.+)?)$", name
        )
        if special:
            notes.add(f"CSV column {name}", "not used by evalgate", f"{path}:1")
    tests = []
    for line, row in rows:
        test: dict[str, Any] = {
            "vars": {k: v for k, v in row.items() if not k.startswith("__")},
            "assert": [
                a
                for k, v in row.items()
                if re.match(r"^__expected\d*$", k) and (a := parse_assertion(v)) is not None
            ],
        }
        if row.get("__description"):
            test["description"] = row["__description"]
        metadata = {k.split(":", 1)[1]: v for k, v in row.items() if k.startswith("__metadata:")}
        if metadata:
            test["metadata"] = metadata
        tests.append((line, test))
    return tests


def read_promptfoo(path: Path) -> Source:
    reader = _Reader(path)
    reader.load(path, {})
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
        user_turn=(
            reader.first_prompt.user
            if reader.first_prompt and reader.first_prompt.system is not None
            else None
        ),
    )
