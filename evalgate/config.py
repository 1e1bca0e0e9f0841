"""evalgate.yml: pydantic models and the one place config is validated.

Every error names the file, the line, the key path, what was found and what is allowed.
"""

from __future__ import annotations

import glob
import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from evalgate import files
from evalgate.errors import (
    ConfigError,
    UserError,
    describe_validation,
    first_validation_error,
)
from evalgate.trajectory import TOOL_NAME_PATTERN
from evalgate.yamlpos import line_of

DEFAULT_CONFIG = "evalgate.yml"


# Suite names and prompt versions become file names (runs, baselines, artefacts), marker
# text and log lines: letters, digits, '.', '_' and '-', starting with a letter or digit.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
_NAME = re.compile(NAME_PATTERN)
NAME_RULE = "1-100 letters, digits, '.', '_' or '-', starting with a letter or digit"


def valid_name(name: str) -> bool:
    return bool(_NAME.match(name)) and not name.endswith(".")


def _no_bool(value: Any) -> Any:
    """Integer literals (``version: 1``, ``inconclusive_exit: 0``) are not booleans, which
    YAML's ``true`` would otherwise equal."""
    if isinstance(value, bool):
        raise ValueError("Input should be an integer, not a boolean")
    return value


class Strict(BaseModel):
    # strict: `max_tokens: true` or `mid_p: 1` is an error, not a silent 1 or True. Integers
    # are still accepted for float fields (`temperature: 0`).
    model_config = ConfigDict(extra="forbid", strict=True)


class Fields(Strict):
    """How a case file's fields map onto what evalgate needs (so existing JSONL needs no rewrite)."""

    # The field holding the case id (strings or integers).
    id: str = "id"
    # The fields the user-turn template sees; None means every field of the case.
    input: list[str] | None = None
    # The field holding the expected answer.
    expected: str = "expected"
    # The scenario group: phrasings of one request share it (null: none).
    group: str | None = "group"
    # The category, for per-category tables and critical categories (null: none).
    category: str | None = "category"
    # A split written on the case (dev, holdout, regression), which wins over hashing.
    split: str | None = "split"
    # Agent cases: prior user and assistant turns, sent before the templated last turn.
    messages: str | None = "messages"
    # Agent cases: what each tool returns when called, by tool name (see docs/agents.md).
    fixtures: str | None = "fixtures"


class ModelSettings(Strict):
    # fake, anthropic, openai (an extra) or command.
    backend: str = "fake"
    # The model id the backend sends (and prices by).
    name: str = "fake"
    # The reply's token limit; replies cut off there are flagged.
    max_tokens: int = Field(default=1024, gt=0)
    # None: the model's default (newer models may not accept the parameter at all).
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    # Backend-specific settings (fake rules, thinking, effort, response schema, command, ...).
    options: dict[str, Any] = Field(default_factory=dict)


class LabelScorer(Strict):
    # The scorer's kind.
    kind: Literal["label"]
    # The JSON field of the reply holding the label.
    field: str = "category"


class ExactScorer(Strict):
    # The scorer's kind.
    kind: Literal["exact"]
    # Compare case-sensitively.
    case_sensitive: bool = False
    # Strip surrounding whitespace before comparing.
    strip: bool = True


class ContainsScorer(Strict):
    # The scorer's kind.
    kind: Literal["contains"]
    # Search case-sensitively.
    case_sensitive: bool = False


class RegexScorer(Strict):
    # The scorer's kind.
    kind: Literal["regex"]
    # When absent, the case's expected answer is the pattern.
    pattern: str | None = None
    # Match case-insensitively.
    ignore_case: bool = True


class JsonSchemaScorer(Strict):
    # The scorer's kind.
    kind: Literal["json_schema"]
    # The JSON schema, inline.
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    # The JSON schema, from a file beside evalgate.yml.
    schema_file: str | None = None
    # When set, the answer is this field of the reply and it must equal the expected answer.
    field: str | None = None

    @model_validator(mode="after")
    def _one_schema(self) -> JsonSchemaScorer:
        if (self.schema_ is None) == (self.schema_file is None):
            raise ValueError("give exactly one of 'schema' or 'schema_file'")
        return self


class PythonScorer(Strict):
    # The scorer's kind.
    kind: Literal["python"]
    function: str = Field(pattern=r"^[\w.]+:[\w]+$", description="module:function")


class JudgeScorer(Strict):
    """A model grades each reply against a rubric (and the case's reference answer, if any)."""

    # The scorer's kind.
    kind: Literal["judge"]
    # The rubric, inline.
    rubric: str | None = None
    # The rubric, from a file beside evalgate.yml.
    rubric_file: str | None = None
    model: ModelSettings = Field(description="the judge's backend, model and settings")

    @model_validator(mode="after")
    def _one_rubric(self) -> JudgeScorer:
        if (self.rubric is None) == (self.rubric_file is None):
            raise ValueError("give exactly one of 'rubric' or 'rubric_file'")
        return self


class ToolSequenceScorer(Strict):
    """The agent's tool calls against the case's expected sequence (docs/agents.md)."""

    # The scorer's kind.
    kind: Literal["tool_sequence"]
    # exact: the same calls in the same order; in_order: the expected calls in order, others
    # allowed between; any_order: the same calls in any order; subset: the expected calls in
    # any order, others allowed.
    match: Literal["exact", "in_order", "any_order", "subset"] = "exact"
    # A continuous score instead of pass / fail: 1 - normalised edit distance over calls, or
    # F1 of matched calls (a case still passes at 0.5 or more).
    partial: Literal["edit_distance", "f1"] | None = None


class ToolUsedScorer(Strict):
    """Passes when every named tool was called (names from here, else the case's expected)."""

    # The scorer's kind.
    kind: Literal["tool_used"]
    # The tools that must be called; empty: the case's expected names them.
    tools: list[str] = Field(default_factory=list)


class ToolNotUsedScorer(Strict):
    """Passes when none of the named tools was called."""

    # The scorer's kind.
    kind: Literal["tool_not_used"]
    # The tools that must not be called; empty: the case's expected names them.
    tools: list[str] = Field(default_factory=list)


class MaxStepsScorer(Strict):
    """Passes when the agent finished within a number of model calls."""

    # The scorer's kind.
    kind: Literal["max_steps"]
    # The most model calls allowed; None: the case's expected gives it.
    limit: int | None = Field(default=None, ge=1)


class AllOfScorer(Strict):
    """Passes when every listed scorer passes; the score is the lowest of theirs."""

    # The scorer's kind.
    kind: Literal["all_of"]
    # The criteria. Each reads expected[KIND] when the case's expected is an object with that
    # key, else the whole expected answer.
    scorers: list[ScorerConfig] = Field(min_length=1)


ScorerConfig = Annotated[
    LabelScorer
    | ExactScorer
    | ContainsScorer
    | RegexScorer
    | JsonSchemaScorer
    | PythonScorer
    | JudgeScorer
    | ToolSequenceScorer
    | ToolUsedScorer
    | ToolNotUsedScorer
    | MaxStepsScorer
    | AllOfScorer,
    Field(discriminator="kind"),
]
AllOfScorer.model_rebuild()
TRAJECTORY_KINDS = frozenset({"tool_sequence", "tool_used", "tool_not_used", "max_steps"})


def scorer_kinds(config: Any) -> set[str]:
    """Every kind a scorer config uses (all_of's members included)."""
    if config.kind == "all_of":
        return {"all_of"}.union(*(scorer_kinds(c) for c in config.scorers))
    return {config.kind}


class Tool(Strict):
    """A tool offered to the model, as the Messages API takes it."""

    # The tool's name (letters, digits, _ and -, up to 64).
    name: str = Field(pattern=TOOL_NAME_PATTERN)
    # What the tool does, for the model.
    description: str = ""
    # The JSON schema of the tool's input.
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})

    @field_validator("input_schema")
    @classmethod
    def _valid_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        import jsonschema

        if value.get("type") != "object":
            raise ValueError("a tool's input_schema must have type: object")
        try:
            jsonschema.Draft202012Validator.check_schema(value)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"not a valid JSON schema: {exc.message}") from None
        return value


class AgentSettings(Strict):
    """How the agent loop runs a case when the suite offers tools."""

    # Model calls a case may make; a model still calling tools after them is an error.
    max_steps: int = Field(default=10, ge=1, le=100)
    # A call no fixture answers (and no tool_command): answered "unavailable" to the model and
    # recorded as missing, or made an error of the case.
    on_missing_fixture: Literal["unavailable", "error"] = "unavailable"
    # A program that answers calls no fixture answers: the call as JSON on stdin, its result
    # as {"result": ...} or {"error": "..."} on stdout. Runs in the config's folder.
    tool_command: list[str] | str | None = None
    # Seconds a tool command may take before the case is an error.
    tool_timeout_s: float = Field(default=30.0, gt=0)


class GatePolicy(Strict):
    """How the gate decides. Defaults follow the README's statistics section."""

    # The significance level of every test.
    alpha: float = Field(default=0.05, gt=0.0, lt=0.5)
    # The largest drop (as a fraction) a pass may hide: a pass needs the data to rule out a
    # drop this large (non-inferiority margin), and the suite should detect it with 80% power.
    tolerance: float = Field(default=0.05, gt=0.0, lt=1.0)
    # The power the minimum detectable effect is computed for.
    power: float = Field(default=0.80, gt=0.0, lt=1.0)
    # The paired test for pass/fail scores: the exact conditional test over every repeat of
    # both runs (1:R / K:R matched sets), or the sign test over matched repeats.
    test: Literal["conditional", "sign"] = "conditional"
    # Use the mid-p version of the test (less conservative, not exact) instead of the exact one.
    mid_p: bool = False
    # Sign test only: cases that flipped between baseline repeats it does not use are left out.
    exclude_unstable: bool = True
    # The share of each suite's alpha given to the paired test; the other fail routes (format
    # validity, critical categories, a failing noise check) share the rest (weighted Holm).
    paired_alpha_share: float = Field(default=0.9, gt=0.0, le=1.0)
    # Does the PR break more than the baseline's measured flips predict? off | warn | fail.
    noise_check: Literal["off", "warn", "fail"] = "warn"
    # Categories whose own regression fails the gate (Holm-adjusted).
    critical_categories: list[str] = Field(default_factory=list)
    # Continuous scores (a judge's 0..1): sign-flip permutation test, or Wilcoxon (Pratt).
    continuous_test: Literal["permutation", "wilcoxon"] = "permutation"
    # The unit of inference: scenario groups when cases carry groups (auto), or always cases
    # (for suites whose groups are labels only), or groups.
    unit: Literal["auto", "case", "group"] = "auto"
    # More than this share of the candidate's cases unpaired (new, edited) -> inconclusive.
    max_unpaired_share: float = Field(default=0.2, ge=0.0, le=1.0)
    # Exit code of `evalgate gate` for an inconclusive verdict (0 with a warning, or 1).
    inconclusive_exit: Annotated[Literal[0, 1], BeforeValidator(_no_bool)] = 0
    # Repeats for a baseline run (the noise floor needs at least 2).
    baseline_repeats: int = Field(default=2, ge=1, le=50)
    # A baseline older than this is used with a warning (artefacts also expire, 90 days).
    max_baseline_age_days: float = Field(default=14.0, gt=0)
    # When a pull request finds no baseline: run the base branch's prompt in the same job (twice
    # the cost), or report inconclusive.
    no_baseline: Literal["run", "inconclusive"] = "run"
    # Seed of every randomised test (permutation tests).
    seed: int = 0


class SplitPolicy(Strict):
    """How cases are assigned to dev and holdout, and what counts as a leak."""

    # Mixed into the hash: a new salt reshuffles every unassigned case (do it only on purpose).
    salt: str = "evalgate"
    # The share of scenario groups hashed to the holdout.
    holdout_fraction: float = Field(default=0.30, ge=0.0, lt=1.0)
    # Cases sharing this key land on the same side; falls back to the case id. Default: the
    # field mapped as fields.group.
    group_field: str | None = None
    # Word-shingle Jaccard similarity at or above which two inputs across sides are a leak.
    near_duplicate: float = Field(default=0.8, gt=0.0, le=1.0)
    # Words per shingle in the near-duplicate check.
    shingle_words: int = Field(default=3, ge=1, le=10)
    # Fewer holdout cases than this is reported: too few to read a gap.
    min_holdout: int = Field(default=40, ge=0)
    # How many times the holdout may be read before release reports warn.
    read_budget: int = Field(default=10, ge=1)
    # The release every release's holdout is also compared with, so that many small drops
    # cannot add up unnoticed; default: the first release in the history.
    reference_release: str | None = None


class SealedHoldout(Strict):
    """Holdout cases kept encrypted to a public key in the repository."""

    # The sealed store, one encrypted case a line, relative to evalgate.yml.
    file: str = "holdout.sealed.jsonl"
    # The public key file that `evalgate holdout keygen` writes.
    public_key: str = "holdout.pub"
    # The change ledger that `holdout add` and `holdout retire` append to (commit it with the
    # sealed file): a release fails when the sealed file changed in a way it does not record.
    changes: str = "holdout.changes.jsonl"


class JudgeCalibration(Strict):
    """Human labels the suite's judge is measured against, and the floor it must clear to gate."""

    # The labels file (JSONL or YAML, relative to evalgate.yml): the case's input fields, the
    # reply to grade and the human verdict; ids, groups and splits as fields: maps them for cases.
    labels: str
    # The field holding the reply the judge grades.
    reply_field: str = "reply"
    # The field holding the human verdict: pass / fail, true / false, or a score in [0, 1].
    human_field: str = "human"
    # A human score at or above this is a pass (the judge's scores use the gate's 0.5).
    human_threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    # Mixed into the labels' hash, apart from the cases' salt: labels split on their own.
    salt: str = "evalgate-judge"
    # The share of label groups hashed to the holdout (a split written on an item wins).
    holdout_fraction: float = Field(default=0.30, ge=0.0, lt=1.0)
    # Fewer labels than this where the floor is read (the holdout) and the judge may not gate.
    min_labels: int = Field(default=50, ge=1)
    # The lower end of kappa's 95% interval (on the holdout) must reach this for the judge to gate.
    min_kappa: float = Field(default=0.6, ge=-1.0, le=1.0)
    # Kappa's 95% interval: a seeded bootstrap over the labels' groups (its seed is gate.seed),
    # or the large-sample analytic one, which covers less than 95% at small n and with groups.
    interval: Literal["bootstrap", "analytic"] = "bootstrap"


class Suite(Strict):
    prompts: list[str] = Field(min_length=1, description="prompt files or globs")
    # The prompt version the product ships: the one pull requests and releases are gated on.
    # Default: the only version, or the last by name.
    ship: str | None = None
    cases: list[str] = Field(min_length=1, description="case files or globs")
    # The case files' format: evalgate's own JSONL / YAML, or another tool's, read directly
    # (promptfoo, openai-evals, inspect, langfuse; see docs/importers.md).
    cases_format: Literal["evalgate", "promptfoo", "openai-evals", "inspect", "langfuse"] = (
        "evalgate"
    )
    # How the case files' fields map onto evalgate's.
    fields: Fields = Fields()
    # The user turn (jinja2, StrictUndefined), the same for every prompt version.
    template: str = "{{ input }}"
    # The backend, model and settings of the system under test.
    model: ModelSettings = ModelSettings()
    # How a reply is scored: label, exact, contains, regex, json_schema, python or judge; an
    # agent's calls: tool_sequence, tool_used, tool_not_used, max_steps; all_of combines them.
    scorer: ScorerConfig
    # Calls in flight at once (--concurrency overrides it).
    concurrency: int = Field(default=16, ge=1, le=512)
    # A run with a larger share of errored cases is incomplete (the gate refuses to pass it).
    max_error_share: float = Field(default=0.02, ge=0.0, le=1.0)
    # For a fake run, what the same tokens would cost on a named real model.
    price_as: str | None = "claude-haiku-4-5"
    # How the gate decides.
    gate: GatePolicy = GatePolicy()
    # Dev / holdout assignment and leak checks.
    split: SplitPolicy = SplitPolicy()
    # Holdout cases encrypted to a public key in the repository (optional, recommended).
    sealed_holdout: SealedHoldout | None = None
    # Tools offered to the model: the suite's cases become agent cases (docs/agents.md).
    tools: list[Tool] = Field(default_factory=list)
    # The agent loop's rules (used when tools are given).
    agent: AgentSettings = AgentSettings()
    # Human labels for the judge scorer: `evalgate judge check` and the floor before it gates.
    judge: JudgeCalibration | None = None

    @field_validator("prompts", "cases", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _tools_fit_scorer(self) -> Suite:
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            twice = next(n for n in names if names.count(n) > 1)
            raise ValueError(f"tool {twice!r} is listed twice")
        if not self.tools and scorer_kinds(self.scorer) & TRAJECTORY_KINDS:
            raise ValueError(
                "a tool_sequence, tool_used, tool_not_used or max_steps scorer needs tools: "
                "list the tools the model may call"
            )
        return self

    @model_validator(mode="after")
    def _judge_needs_a_judge(self) -> Suite:
        if self.judge is not None and self.scorer.kind != "judge":
            raise ValueError(
                f"a judge: section calibrates a judge scorer, and this suite's scorer is "
                f"{self.scorer.kind!r}"
            )
        return self


class Config(Strict):
    # The config format's version.
    version: Annotated[Literal[1], BeforeValidator(_no_bool)] = 1
    # Tags (glob) whose push runs the release gate in the action.
    release_tags: str = "v*"
    # One or more suites by name.
    suites: dict[str, Suite] = Field(min_length=1)
    # Where runs, the cache and baselines are kept, relative to the config file.
    state_dir: str = ".evalgate"

    @field_validator("suites")
    @classmethod
    def _suite_names(cls, suites: dict[str, Suite]) -> dict[str, Suite]:
        for name in suites:
            if not valid_name(name):
                raise ValueError(f"suite name {name!r} is not allowed: {NAME_RULE}")
        return suites


class LoadedConfig(BaseModel):
    """A validated config and the directory its relative paths are resolved against."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    config: Config
    path: Path

    @property
    def root(self) -> Path:
        return self.path.parent

    @property
    def repository(self) -> Path:
        """The repository the config belongs to: no path in it may lead out of this folder."""
        return files.repository_root(self.root)

    def inside(self, relative: str | Path, what: str) -> Path:
        """A path of the config, resolved against its folder; refused if it leaves the repository."""
        return files.contain(
            self.root / relative, self.repository, what, str(self.path), ConfigError
        )

    @property
    def state_dir(self) -> Path:
        return self.inside(self.config.state_dir, "state_dir")

    def suite(self, name: str | None) -> tuple[str, Suite]:
        suites = self.config.suites
        if name is None:
            if len(suites) == 1:
                return next(iter(suites.items()))
            raise ConfigError(
                f"{self.path} defines {len(suites)} suites",
                fix=f"choose one with --suite ({', '.join(suites)})",
            )
        if name not in suites:
            raise ConfigError(
                f"no suite named {name!r} in {self.path}",
                fix=f"use one of: {', '.join(suites)}",
            )
        return name, suites[name]

    def expand(self, patterns: list[str], what: str) -> list[Path]:
        """Resolve files and globs relative to the config; each pattern must match something."""
        found: list[Path] = []
        for pattern in patterns:
            matches = sorted(glob.glob(str(self.root / pattern), recursive=True))
            if not matches:
                raise ConfigError(
                    f"{what} {pattern!r} matches no file",
                    where=str(self.path),
                    fix=f"paths are relative to {self.root}",
                )
            for match in map(Path, matches):
                if match not in found:
                    found.append(self.inside(match, what))
        return found

    def prompt_files(self, suite: Suite) -> dict[str, Path]:
        """Prompt versions by name (the file stem)."""
        versions: dict[str, Path] = {}
        for path in self.expand(suite.prompts, "prompt"):
            if path.stem in versions:
                raise ConfigError(
                    f"two prompt files share the version name {path.stem!r}: "
                    f"{versions[path.stem]} and {path}",
                    fix="a version's name is its file stem; rename one",
                )
            if not valid_name(path.stem):
                raise ConfigError(
                    f"prompt version {path.stem!r} (the stem of {path.name!r}) is not allowed",
                    where=str(self.path),
                    fix=f"rename the file: a version's name is {NAME_RULE}",
                )
            versions[path.stem] = path
        return versions

    def ship_version(self, suite: Suite) -> str:
        """The version pull requests and releases gate: ``ship``, or the last by name."""
        versions = self.prompt_files(suite)
        if suite.ship is not None:
            if suite.ship not in versions:
                raise ConfigError(
                    f"ship: {suite.ship!r} is not a prompt version of this suite",
                    where=str(self.path),
                    fix=f"versions: {', '.join(sorted(versions))}",
                )
            return suite.ship
        return sorted(versions)[-1]

    def dependencies(self, suite: Suite) -> list[Path]:
        """Every file a suite's result depends on: a PR touching none of them cannot change it."""
        paths = [self.path, *self.prompt_files(suite).values()]
        paths += self.expand(suite.cases, "case file")
        if suite.cases_format != "evalgate":
            from evalgate.importers import referenced_files

            for case_file in self.expand(suite.cases, "case file"):
                paths += referenced_files(suite.cases_format, case_file)
        for options in (suite.model.options, getattr(suite.scorer, "__dict__", {})):
            for key in ("rules_file", "schema_file", "rubric_file"):
                value = options.get(key)
                if isinstance(value, str):
                    paths.append(self.root / value)
        if suite.sealed_holdout is not None:
            paths.append(self.root / suite.sealed_holdout.file)
        if suite.judge is not None:
            paths.append(self.root / suite.judge.labels)
        if suite.scorer.kind == "judge":
            from evalgate.scorers.base import file_names

            paths += [self.root / name for name in file_names(suite.scorer)]
        if suite.scorer.kind == "python":
            paths.append(
                self.root / (suite.scorer.function.split(":")[0].replace(".", "/") + ".py")
            )
        return [p.resolve() for p in paths]


class UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that refuses duplicate keys, which YAML would let the last one win."""


def _no_duplicates(loader: UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"duplicate key {key!r} (first on line {seen[key]})",
                key_node.start_mark,
            )
        seen[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep=deep)


UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _no_duplicates,
)


SCORER_KINDS = (
    "label",
    "exact",
    "contains",
    "regex",
    "json_schema",
    "python",
    "judge",
    "tool_sequence",
    "tool_used",
    "tool_not_used",
    "max_steps",
    "all_of",
)


def _tagged_branch(union: Any, tag: Any) -> type[BaseModel] | None:
    """The model of a tagged union whose ``kind`` is ``tag`` (pydantic puts tags in error paths)."""
    for arg in getattr(union, "__args__", ()):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            kind = arg.model_fields.get("kind")
            if kind is not None and get_args(kind.annotation) == (tag,):
                return arg
    return None


def _allowed_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str] | None:
    """The keys allowed where an unknown key was found, walking the models along ``loc``."""
    current: Any = model
    for part in loc[:-1]:
        branch = _tagged_branch(current, part)
        if branch is not None:
            current = branch
            continue
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(part))
            if field is None:
                continue
            current = field.annotation
        args = getattr(current, "__args__", None)
        if args:
            models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
            if len(models) == 1:
                current = models[0]
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [f.alias or name for name, f in current.model_fields.items()]
    return None


def load_yaml(text: str, path: Path, error: type[UserError] = ConfigError) -> Any:
    """A YAML document (duplicate keys refused); every way it cannot be read is an ``error``."""
    try:
        if files.yaml_depth(text) > files.MAX_DEPTH:
            raise error(f"YAML nested too deeply (over {files.MAX_DEPTH} levels)", where=str(path))
        return yaml.load(text, Loader=UniqueKeyLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise error(f"invalid YAML: {getattr(exc, 'problem', exc)}", where=where) from None
    except RecursionError:
        raise error("YAML nested too deeply to read", where=str(path)) from None
    except ValueError as exc:
        # A value the loader itself refuses: an integer over 4,300 digits.
        raise error(f"YAML that cannot be read: {exc}"[:300], where=str(path)) from None


def parse_config(text: str, path: Path) -> Config:
    data = load_yaml(text, path)
    if not isinstance(data, dict):
        raise ConfigError(
            "the config must be a mapping with a 'suites' key",
            where=str(path),
            fix="see examples/bike-shop/evalgate.yml",
        )
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        error, guess, others = first_validation_error(
            exc.errors(), lambda loc: _allowed_keys(Config, loc)
        )
        # Drop pydantic's union-branch tags (e.g. 'label') from the path the user sees.
        loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and p.endswith("]")))
        # ... and the scorer's kind tag, which pydantic puts after "scorer".
        shown = [
            p for i, p in enumerate(loc) if not (i and loc[i - 1] == "scorer" and p in SCORER_KINDS)
        ]
        key_path = ".".join(str(p) for p in shown)
        line = line_of(text, shown)
        where = f"{path}:{line}" if line else str(path)
        fix = None
        what = describe_validation(error, tag_noun="scorer kind")
        if error["type"] == "extra_forbidden":
            allowed = _allowed_keys(Config, loc)
            if guess is not None:
                what += f"; did you mean {guess}?"
            if allowed:
                fix = f"allowed here: {', '.join(allowed)}"
                if guess is not None:
                    fix = f"rename it to {guess}; {fix}"
        elif error["type"] in ("union_tag_invalid", "union_tag_not_found"):
            fix = f"scorer kinds: {', '.join(SCORER_KINDS)}"
        more = f" (and {others} more)" if others else ""
        raise ConfigError(f"{key_path}: {what}{more}", where=where, fix=fix) from None


def load_config(path: Path) -> LoadedConfig:
    if not path.exists() and not path.is_symlink():
        raise ConfigError(
            f"config file {path} does not exist",
            fix="pass --config PATH, or run `evalgate demo` to try the bundled example",
        )
    text = files.read_text(path, "config file", ConfigError)
    config = parse_config(text, path)
    check_templates(config, text, path)
    loaded = LoadedConfig(config=config, path=path.resolve())
    _check_paths(loaded)
    return loaded


def _check_paths(loaded: LoadedConfig) -> None:
    """Every single path the config names stays inside the repository (globs: at expansion)."""
    _ = loaded.state_dir
    for suite in loaded.config.suites.values():
        named: list[tuple[str, Any]] = [
            ("rules_file", suite.model.options.get("rules_file")),
            ("schema_file", getattr(suite.scorer, "schema_file", None)),
            ("rubric_file", getattr(suite.scorer, "rubric_file", None)),
        ]
        if suite.sealed_holdout is not None:
            named += [
                ("sealed_holdout.file", suite.sealed_holdout.file),
                ("sealed_holdout.public_key", suite.sealed_holdout.public_key),
                ("sealed_holdout.changes", suite.sealed_holdout.changes),
            ]
        for what, value in named:
            if isinstance(value, str):
                loaded.inside(value, what)


def check_templates(config: Config, text: str, path: Path) -> None:
    """A suite's user-turn template that does not parse is an error at its line in the config
    (not "template:6"), found when the config loads rather than at the first case."""
    from evalgate.templating import syntax_error

    for name, suite in config.suites.items():
        found = syntax_error(suite.template)
        if found is None:
            continue
        message, line = found
        key_line = line_of(text, ["suites", name, "template"])
        where = str(path)
        if key_line is not None:
            after_key = text.splitlines()[key_line - 1].split(":", 1)[-1].strip()
            # A block scalar (| or >) starts on the next line; a plain or quoted one on this.
            block = after_key[:1] in ("|", ">")
            where = f"{path}:{key_line + line if block else key_line + line - 1}"
        raise ConfigError(
            f"suites.{name}.template: template syntax error: {message}",
            where=where,
            fix="fix the jinja2 syntax ({{ field }}, {% if %} ... {% endif %})",
        )
