"""Loading evalgate.yml: YAML with line numbers, duplicate keys refused, the schema applied, and
the paths it names checked; ``LoadedConfig`` is a config with the folder it is resolved in.
"""

import os
import re
import shlex
from pathlib import Path, PurePosixPath
from typing import Any, get_args

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationError,
)

from evalgate import files, globs
from evalgate.config.models import (
    NAME_RULE,
    SCORER_KINDS,
    Config,
    Suite,
    file_arguments,
    program_argv,
    valid_name,
)
from evalgate.config.yamlcore import CoreLoader
from evalgate.config.yamlpos import line_of
from evalgate.errors import (
    ConfigError,
    UserError,
    describe_validation,
    first_validation_error,
)


class LoadedConfig(BaseModel):
    """A validated config and the directory its relative paths are resolved against."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    config: Config
    path: Path
    # Set by the action (evalgate/action/state.py): the job's own folder outside the checkout,
    # used instead of the config's state_dir, which whoever wrote the checkout controls.
    state_root: Path | None = None

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
        if self.state_root is not None:
            return self.state_root
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
            # Not glob.glob: its ** follows links to folders (two links to . never end).
            matches = globs.expand(self.root, pattern, globs.MAX_MATCHES)
            if len(matches) > globs.MAX_MATCHES:
                raise ConfigError(
                    f"{what} {pattern!r} matches more than {globs.MAX_MATCHES:,} files",
                    where=str(self.path),
                    fix="narrow the glob",
                )
            if not matches:
                raise ConfigError(
                    f"{what} {pattern!r} matches no file",
                    where=str(self.path),
                    fix=f"paths are relative to {self.root}",
                )
            for match in matches:
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
            from evalgate.cases.importers import referenced_files

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
        if suite.tools:
            paths += [self.root / name for name in file_arguments(suite.agent.tool_argv())]
        # The command backend's program is the system under test (and a judge's, the grader).
        for settings in (suite.model, getattr(suite.scorer, "model", None)):
            paths += [self.root / name for name in command_files(settings, self.root)]
        if suite.scorer.kind == "python":
            paths.append(
                self.root / (suite.scorer.function.split(":")[0].replace(".", "/") + ".py")
            )
        return [p.resolve() for p in paths]


# An interpreter's name (python, python3, python3.12), and its one-letter options that take
# no value (those that do: -W and -X; -c ends the options with a program, -m with a module).
_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)*)?$")
_FLAGS = frozenset("bBdEhiIOPqRsSuvVx")
_MODULE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")


def module_argument(argv: list[str]) -> str | None:
    """The module a Python command line runs (``python -m pkg.app``, ``uv run python3 -u -m
    pkg.app``, ``python -mpkg.app``), or None."""
    at = next((i for i, a in enumerate(argv) if _PYTHON.match(PurePosixPath(a).name)), None)
    if at is None:
        return None
    rest = iter(argv[at + 1 :])
    for arg in rest:
        if arg.startswith("--"):
            continue  # --version and the like take no value
        if not arg.startswith("-") or arg == "-":
            return None  # a script (a file argument) or stdin
        flags = arg[1:].lstrip("".join(_FLAGS))
        option, value = flags[:1], flags[1:]
        if option == "m":
            name = value or next(rest, "")
            return name if _MODULE.match(name) else None
        if option in ("W", "X"):
            if not value:
                next(rest, None)
            continue
        if option:
            return None  # -c (a program in the argument), or an option not known here
    return None


def module_files(name: str, root: Path) -> list[str]:
    """The files of the repository that ``python -m NAME`` runs from ``root`` (its working
    folder): every Python file of the top-level package (the module runs its packages'
    ``__init__`` and imports its siblings), or the one module. Nothing for a module that is
    not in the repository (the standard library's, an installed package's)."""
    top = name.split(".")[0]
    if os.path.isdir(root / top) and not os.path.islink(root / top):
        found = globs.expand(root, f"{top}/**/*.py", globs.MAX_MATCHES)
        return [p.relative_to(root).as_posix() for p in found if p.is_file()]
    return [f"{top}.py"] if (root / f"{top}.py").is_file() else []


def command_files(settings: object, root: Path) -> list[str]:
    """The files of the repository a ``command`` backend's command line names: its program
    (``./app``), the file arguments (``python app.py``), as ``file_arguments`` finds them, and
    the package a ``python -m pkg.app`` runs (relative to ``root``, the command's folder)."""
    if getattr(settings, "backend", None) != "command":
        return []
    command = (getattr(settings, "options", None) or {}).get("command")
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError:
            return []  # the backend refuses it when it starts
    elif isinstance(command, list):
        argv = [str(a) for a in command]
    else:
        return []
    module = module_argument(argv)
    return file_arguments(argv) + (module_files(module, root) if module else [])


class UniqueKeyLoader(CoreLoader):
    """A safe loader that refuses duplicate keys, which YAML would let the last one win, and
    reads plain scalars by YAML 1.2's core schema (``Yes``, ``NO``, ``on`` stay strings)."""


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
        return yaml.load(text, Loader=UniqueKeyLoader)  # a safe loader (no Python objects)
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
            fix="`evalgate init` writes a working one (every key: docs/configuration.md)",
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
            fix="pass --config PATH, make one here with `evalgate init`, or run `evalgate demo` to "
            "try the bundled example",
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
        if suite.judge is not None:
            named.append(("judge.labels", suite.judge.labels))
        if suite.sealed_holdout is not None:
            named += [
                ("sealed_holdout.file", suite.sealed_holdout.file),
                ("sealed_holdout.public_key", suite.sealed_holdout.public_key),
                ("sealed_holdout.changes", suite.sealed_holdout.changes),
            ]
        for what, value in named:
            if isinstance(value, str):
                loaded.inside(value, what)
        for what, value in named_files(suite.model_dump()):
            loaded.inside(value, what)


def named_files(value: Any, path: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """Every file a dumped suite names, with its key path: each ``*_file`` option at any depth
    (a judge's model options, a scorer inside ``all_of``) and the files a ``command`` or
    ``tool_command`` is handed. They are read (and hashed) like the rest: inside the repository."""
    key = path[-1] if path else ""
    if key in ("command", "tool_command"):
        dotted = ".".join(path)
        return [(dotted, arg) for arg in file_arguments(program_argv(value))]
    if isinstance(value, dict):
        return [f for k, v in value.items() for f in named_files(v, (*path, str(k)))]
    if isinstance(value, list | tuple):
        return [f for i, v in enumerate(value) for f in named_files(v, (*path, str(i)))]
    if isinstance(value, str) and key.endswith("_file"):
        return [(".".join(path), value)]
    return []


def check_templates(config: Config, text: str, path: Path) -> None:
    """A suite's user-turn template that does not parse is an error at its line in the config
    (not "template:6"), found when the config loads rather than at the first case."""
    from evalgate.cases.templating import syntax_error

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
