"""evalgate.yml: pydantic models and the one place config is validated.

Every error names the file, the line, the key path, what was found and what is allowed.
"""

import re
import shlex
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from evalgate.defaults import CONFIG_FILE, STATE_DIR
from evalgate.trajectory import TOOL_NAME_PATTERN

DEFAULT_CONFIG = CONFIG_FILE


# Suite names and prompt versions become file names (runs, baselines, artefacts), marker
# text and log lines: letters, digits, '.', '_' and '-', starting with a letter or digit.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
_NAME = re.compile(NAME_PATTERN)
NAME_RULE = "1-100 letters, digits, '.', '_' or '-', starting with a letter or digit"


def valid_name(name: str) -> bool:
    # fullmatch: `$` alone would let a trailing newline through into file names and logs.
    return bool(_NAME.fullmatch(name)) and not name.endswith(".")


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
    options: dict[str, Any] = {}


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
    def _one_schema(self) -> "JsonSchemaScorer":
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
    def _one_rubric(self) -> "JudgeScorer":
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
    tools: list[str] = []


class ToolNotUsedScorer(Strict):
    """Passes when none of the named tools was called."""

    # The scorer's kind.
    kind: Literal["tool_not_used"]
    # The tools that must not be called; empty: the case's expected names them.
    tools: list[str] = []


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
    scorers: "list[ScorerConfig]" = Field(min_length=1)


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


def _kind_of(model: type[BaseModel]) -> str:
    (kind,) = get_args(model.model_fields["kind"].annotation)
    return str(kind)


# The one list of scorer kinds: the config's tagged union, in its order (the scorer registry,
# scorers.base, is checked against it by the tests).
SCORER_KINDS: tuple[str, ...] = tuple(_kind_of(m) for m in get_args(get_args(ScorerConfig)[0]))
# The kinds that read an agent's trajectory (a suite with them must offer tools).
TRAJECTORY_KINDS = frozenset(
    _kind_of(m) for m in (ToolSequenceScorer, ToolUsedScorer, ToolNotUsedScorer, MaxStepsScorer)
)


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

    def tool_argv(self) -> list[str]:
        """The tool command as a program and its arguments (empty when there is none)."""
        return program_argv(self.tool_command)


def program_argv(command: Any) -> list[str]:
    """A configured command (a shell-like string or a list) as a program and its arguments."""
    if isinstance(command, str):
        return shlex.split(command)
    return [str(a) for a in command] if isinstance(command, list | tuple) else []


def file_arguments(argv: Sequence[str]) -> list[str]:
    """The arguments of a command that name a file of the repository (``judge.py``,
    ``tools/answer.py``): relative paths with a suffix, not options. What the program runs is
    part of what a result depends on. The program itself counts when it is named by a path
    into the repository (``./judge.sh``, ``bin/judge``), not looked up on PATH (``python``)."""
    program = list(argv[:1])
    if not (program and "/" in program[0] and not PurePosixPath(program[0]).is_absolute()):
        program = []
    return program + [
        arg
        for arg in argv[1:]
        if not arg.startswith("-")
        and not PurePosixPath(arg).is_absolute()
        and "." in PurePosixPath(arg).name
    ]


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
    critical_categories: list[str] = []
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
    # The candidate's repeats a case in a pull request's job: a number for every case, or
    # adaptive: once for each case settled in an earlier baseline (every repeat the same), and
    # unstable_repeats times for each that flipped there or is new to it. The allocation is
    # made before any candidate call from data the test does not compare, so the test stays
    # exact (docs/statistics.md, "Repeats where they decide"). Or two-stage: every case once,
    # then unstable_repeats runs in all of each case (or scenario group) whose baseline repeats
    # and first run were not all the same; the test conditions on that choice and stays exact
    # (docs/statistics.md, "The two-stage design").
    repeats: (
        Annotated[int, Field(ge=1, le=50), BeforeValidator(_no_bool)]
        | Literal["adaptive", "two-stage"]
    ) = 1
    # gate.repeats: adaptive and two-stage only: the repeats of a case that is not settled.
    unstable_repeats: int = Field(default=2, ge=2, le=50)
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


class Budget(Strict):
    """The most one command of the suite (`evalgate run`, or a job) may spend; it stops before
    a call that would pass it. `--resume` sends the rest under a budget of its own."""

    # Calls to the model (retries included; cached replies are free and do not count).
    max_calls: int | None = Field(default=None, gt=0)
    # US dollars at the price table's prices (each call reserved at its max_tokens reply).
    max_usd: float | None = Field(default=None, gt=0)


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
    # A foreign format's own field names for its dataset's fields (inspect: input, target, id,
    # choices; openai-evals: input, ideal), as `evalgate import --input-field` names them.
    cases_format_fields: dict[Literal["input", "target", "ideal", "id", "choices"], str] = Field(
        default_factory=dict
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
    tools: list[Tool] = []
    # The agent loop's rules (used when tools are given).
    agent: AgentSettings = AgentSettings()
    # Human labels for the judge scorer: `evalgate judge check` and the floor before it gates.
    judge: JudgeCalibration | None = None
    # The most one run may spend (calls, dollars): past it the run stops, incomplete (exit 3).
    budget: Budget = Budget()

    @field_validator("prompts", "cases", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _tools_fit_scorer(self) -> "Suite":
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
    def _judge_needs_a_judge(self) -> "Suite":
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
    state_dir: str = STATE_DIR

    @field_validator("suites")
    @classmethod
    def _suite_names(cls, suites: dict[str, Suite]) -> dict[str, Suite]:
        for name in suites:
            if not valid_name(name):
                raise ValueError(f"suite name {name!r} is not allowed: {NAME_RULE}")
        return suites
