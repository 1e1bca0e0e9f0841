"""The layout keeps its promises: the action never imports the CLI, only the two roots read the
environment, and each third-party SDK stays in its one place."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "evalgate"


def _imports(path: Path) -> set[str]:
    """What a module imports at run time (``if TYPE_CHECKING:`` imports are for the types)."""
    names: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(child)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
        for child in ast.walk(node)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def _modules() -> dict[str, set[str]]:
    return {
        path.relative_to(ROOT).as_posix(): _imports(path) for path in sorted(PACKAGE.rglob("*.py"))
    }


def test_the_action_and_the_service_never_import_the_cli() -> None:
    offenders = [
        module
        for module, names in _modules().items()
        if module.startswith(("evalgate/action/", "evalgate/app.py"))
        and any(name == "evalgate.cli" or name.startswith("evalgate.cli.") for name in names)
    ]
    assert offenders == []


def test_only_the_roots_read_the_environment() -> None:
    def reads(path: Path) -> bool:
        return any(
            isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv")
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        )

    readers = sorted(
        path.relative_to(ROOT).as_posix() for path in PACKAGE.rglob("*.py") if reads(path)
    )
    assert readers == ["evalgate/action/main.py", "evalgate/cli/context.py"]


def test_each_sdk_is_imported_in_its_one_place() -> None:
    homes = {
        "anthropic": ("evalgate/backends/anthropic.py",),
        "openai": ("evalgate/backends/openai.py",),
        "github": ("evalgate/publish/github/",),
        "jinja2": ("evalgate/report/", "evalgate/cases/templating.py"),
    }
    for sdk, allowed in homes.items():
        users = [
            module
            for module, names in _modules().items()
            if any(name == sdk or name.startswith(sdk + ".") for name in names)
        ]
        assert users and all(module.startswith(allowed) for module in users), (sdk, users)
