"""GitHub's published REST description (the npm package ``@octokit/openapi``, installed by
scripts/openapi-setup), held against every exchange the GitHub stand-in records: the path and
method are a real endpoint, the query parameters are declared, a JSON request body is one the
operation's schema accepts, and the stand-in's answer has a declared status and a body the
response schema of that operation and status accepts (GitHub marks most fields ``required``:
a body missing one, or with one of another type, is reported with the operation id, the status
and the JSON path, ``$.head.user.login``). The schemas are checked with ``jsonschema`` (already
a dependency), after OpenAPI 3.0's ``nullable`` is written as JSON Schema's ``null`` type and
``oneOf`` as ``anyOf`` (GitHub's alternatives overlap)."""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4

# Where scripts/openapi-setup installs the package; EVALGATE_OPENAPI_DIR moves it.
DEFAULT_DIR = Path(os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache"))) / (
    "evalgate-openapi"
)
PACKAGE = "@octokit/openapi"
VERSION = "23.0.2"
ROOT_URI = "urn:github-rest"


class Exchange(Protocol):
    """One recorded exchange (tests.support.github_server.RecordedRequest), read only."""

    @property
    def server(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def query(self) -> dict[str, list[str]]: ...
    @property
    def body(self) -> bytes: ...
    @property
    def status(self) -> int: ...
    @property
    def forced(self) -> bool: ...
    @property
    def response_body(self) -> bytes: ...


def description_path(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ if env is None else env)
    folder = Path(env.get("EVALGATE_OPENAPI_DIR", str(DEFAULT_DIR)))
    return folder / "node_modules" / "@octokit" / "openapi" / "generated" / "api.github.com.json"


def _nullable(node: Any) -> Any:
    """OpenAPI 3.0's ``nullable: true`` as JSON Schema says it: ``null`` among the types."""
    if isinstance(node, list):
        return [_nullable(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _nullable(value) for key, value in node.items()}
    # GitHub's alternatives overlap (its objects allow more properties, a plain error matches
    # both basic-error and repository-rule-violation-error): one of them must hold, not one only.
    if "oneOf" in out:
        out["anyOf"] = out.pop("oneOf")
    if out.pop("nullable", False) is True:
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        if isinstance(out.get("enum"), list) and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
        if "type" not in out and "enum" not in out:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


def _leaves(error: jsonschema.ValidationError) -> list[jsonschema.ValidationError]:
    """An ``anyOf`` failure as what is wrong in the one alternative of the instance's type
    (a ``nullable`` object that is an object: the object's own problems), else as itself."""
    branches: dict[Any, list[jsonschema.ValidationError]] = {}
    for sub in error.context or []:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    viable = [
        errs
        for errs in branches.values()
        if not any(e.validator == "type" and not e.relative_path for e in errs)
    ]
    if len(viable) != 1:
        return [error]
    return [leaf for sub in viable[0] for leaf in _leaves(sub)]


def _json_path(parts: Iterable[str | int]) -> str:
    """Where in a body a problem is, as a JSON path: ``$.head.repo.owner``, ``$[0].id``."""
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part):
            out += f".{part}"
        else:
            out += f"[{json.dumps(part)}]"
    return out


@dataclass(frozen=True)
class Operation:
    method: str
    template: str
    pattern: re.Pattern[str]
    pointer: str
    spec: dict[str, Any]


class Description:
    """The REST description, indexed by method and path template."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = _nullable(spec)
        self.version = str(spec.get("info", {}).get("version"))
        resource: Resource[Any] = DRAFT4.create_resource(self.spec)
        self.registry: Registry[Any] = Registry().with_resource(ROOT_URI, resource)
        self.operations: list[Operation] = []
        for template, item in self.spec["paths"].items():
            # A path's last parameter may hold slashes ({path} of contents, {ref} of git/ref).
            regex = re.sub(r"\\\{(path|ref)\\\}$", ".+", re.escape(template))
            regex = re.sub(r"\\\{[^}]+\\\}", "[^/]+", regex)
            escaped = template.replace("~", "~0").replace("/", "~1")
            for method, operation in item.items():
                if method in ("get", "post", "put", "patch", "delete"):
                    self.operations.append(
                        Operation(
                            method.upper(),
                            template,
                            re.compile(f"^{regex}$"),
                            f"/paths/{escaped}/{method}",
                            operation,
                        )
                    )
        # A literal segment beats a parameter: /repos/{o}/{r}/git/ref/... before the rest.
        self.operations.sort(key=lambda op: (op.template.count("{"), op.template.endswith("}")))

    def _parameter(self, node: dict[str, Any]) -> dict[str, Any]:
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = self.spec
            for part in ref[2:].split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            return dict(target)
        return node

    def find(self, method: str, path: str) -> Operation | None:
        wanted = "GET" if method == "HEAD" else method
        for op in self.operations:
            if op.method == wanted and op.pattern.match(path):
                return op
        return None

    def _errors(self, pointer: str, instance: Any) -> list[str]:
        validator = jsonschema.Draft4Validator(
            {"$ref": f"{ROOT_URI}#{pointer}"}, registry=self.registry
        )
        found: list[tuple[list[str | int], str]] = []
        for error in validator.iter_errors(instance):
            for leaf in _leaves(error):
                where = list(leaf.absolute_path)
                if leaf.validator == "required" and isinstance(leaf.instance, dict):
                    # A missing field is named where it should be: $.user.node_id.
                    missing = re.match(r"^'(.+)' is a required property$", leaf.message)
                    if missing:
                        where.append(missing.group(1))
                found.append((where, leaf.message[:200]))
        found.sort(key=lambda item: [str(part) for part in item[0]])
        return [f"{_json_path(where)}: {message}" for where, message in found]

    def problems(self, exchange: Exchange, answers: bool = True) -> list[str]:
        """What the description says is wrong with one exchange (nothing: an empty list);
        ``answers=False`` leaves out the answer's body (its status is checked either way)."""
        if exchange.server != "api" or exchange.forced:
            return []
        path = exchange.path.removeprefix("/api/v3") or "/"
        # Pagination links use /repositories/{id}/..., which GitHub serves as /repos/{o}/{r}/...
        path = re.sub(r"^/repositories/\d+", "/repos/owner/repo", path)
        where = f"{exchange.method} {exchange.path}"
        op = self.find(exchange.method, path)
        if op is None:
            return [f"{where}: no such endpoint and method in GitHub's REST description"]
        out: list[str] = []
        parameters = [self._parameter(p) for p in op.spec.get("parameters", [])]
        declared = {p["name"] for p in parameters if p.get("in") == "query"}
        for name in sorted(set(exchange.query) - declared):
            out.append(f"{where}: query parameter {name!r} is not declared for {op.template}")
        # A body the stand-in refused (422, as GitHub does: too many annotations, a summary
        # too long) is a test of that refusal; every other body must be one GitHub accepts.
        refused = 400 <= exchange.status < 500
        if exchange.body and not refused and exchange.method in ("POST", "PUT", "PATCH", "DELETE"):
            content = op.spec.get("requestBody", {}).get("content", {})
            if "application/json" in content:
                pointer = f"{op.pointer}/requestBody/content/application~1json/schema"
                try:
                    body = json.loads(exchange.body)
                except ValueError:
                    out.append(f"{where}: the request body is not JSON")
                else:
                    out += [f"{where}: request {e}" for e in self._errors(pointer, body)]
        responses = op.spec.get("responses", {})
        status = str(exchange.status)
        if status not in responses and exchange.status < 400:
            out.append(f"{where}: status {status} is not a declared answer of {op.template}")
        elif answers and status in responses and exchange.response_body:
            content = responses[status].get("content", {})
            if "application/json" in content and "schema" in content["application/json"]:
                pointer = f"{op.pointer}/responses/{status}/content/application~1json/schema"
                try:
                    answer = json.loads(exchange.response_body)
                except ValueError:
                    out.append(f"{where}: the answer is not JSON")
                else:
                    named = f"{where}: answer {status} of {op.spec.get('operationId', op.template)}"
                    out += [f"{named} at {e}" for e in self._errors(pointer, answer)]
        return out

    def all_problems(self, exchanges: Iterable[Exchange], answers: bool = True) -> list[str]:
        return [p for exchange in exchanges for p in self.problems(exchange, answers)]


@functools.cache
def load(path: Path) -> Description:
    return Description(json.loads(path.read_text(encoding="utf-8")))


def installed(env: dict[str, str] | None = None) -> Description | None:
    """The description when scripts/openapi-setup installed it, else None."""
    path = description_path(env)
    return load(path) if path.is_file() else None
