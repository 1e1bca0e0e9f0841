"""evalgate's YAML loader parses with libyaml where PyYAML has it: the documents, the node
positions and the refusals must be those of PyYAML's own parser, on every YAML file here (the
bundled examples and the third-party corpus) and on hostile texts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from evalgate import files
from evalgate.config import yamlcore

ROOT = Path(__file__).resolve().parents[2]
YAML_FILES = sorted(
    p
    for folder in ("examples", "tests/data")
    for p in (ROOT / folder).rglob("*")
    if p.suffix in (".yml", ".yaml")
)

# The core schema's loader on PyYAML's own reader, scanner and parser: the same methods,
# resolvers and constructors, on yaml.SafeLoader's bases.
PureCoreLoader: Any = type(
    "PureCoreLoader",
    (yaml.SafeLoader,),
    {
        name: value
        for name, value in vars(yamlcore.CoreLoader).items()
        if name not in ("__dict__", "__weakref__", "__init__")
    },
)


def _nodes(node: yaml.Node | None) -> list[tuple[str, str, int, int]]:
    """Every node of a tree, in order, with its tag and where it starts (what evalgate's
    errors point at; a block's end mark may differ over trailing blank lines)."""
    out: list[tuple[str, str, int, int]] = []
    stack: list[Any] = [node]
    while stack:
        item = stack.pop()
        if item is None:
            continue
        start = item.start_mark
        out.append((type(item).__name__, item.tag, start.line, start.column))
        if isinstance(item, yaml.MappingNode):
            stack.extend(x for pair in reversed(item.value) for x in reversed(pair))
        elif isinstance(item, yaml.SequenceNode):
            stack.extend(reversed(item.value))
    return out


def test_libyaml_is_the_parser_here() -> None:
    # PyYAML's wheels bundle libyaml; without it the loader is PyYAML's and this file tests
    # nothing new.
    assert yaml.__with_libyaml__
    assert yamlcore.SafeBase is not yaml.SafeLoader


def test_the_corpus_holds_yaml_files() -> None:
    assert len(YAML_FILES) >= 20, YAML_FILES


@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_both_parsers_read_each_file_alike(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert yaml.load(text, Loader=yamlcore.CoreLoader) == yaml.load(text, Loader=PureCoreLoader)
    assert _nodes(yaml.compose(text, Loader=yamlcore.CoreLoader)) == _nodes(
        yaml.compose(text, Loader=PureCoreLoader)
    )


# Hostile texts as data: each parser's reading, or the refusal (an exception's class), must
# be the other's.
HOSTILE = {
    "anchors-and-merge": "a: &x {k: 1}\nb: *x\nc: {<<: *x, j: 2}\nd: &y [1, 2]\ne: *y\n",
    "core-schema-scalars": "a: [Yes, NO, on, 012, 0o12, 0x1F, 1:30, 2024-01-01, .inf, ~, '']\n",
    "bidi-and-zero-width": "a: \u202ecase\u200b\nb: \ufeffx\n",
    "block-scalars": "a: |\n  one\n   two\nb: >-\n  folded\n  text\n",
    "tabs-in-quoted": 'a: "x\\ty"\n',
    "unclosed-flow": "a: [1\n",
    "tab-indent": "a: b\n\tc: d\n",
    "control-character": "a: \x07\n",
    "undefined-alias": "a: *nothing\n",
    "bad-indent": "a:\n  b: 1\n c: 2\n",
    # a JSON string can carry one ("\ud800"), and libyaml reads UTF-8, which cannot
    "lone-surrogate": "a: \ud800\n",
}
REFUSED = {
    "unclosed-flow",
    "tab-indent",
    "control-character",
    "undefined-alias",
    "bad-indent",
    "lone-surrogate",
}


def _reading(text: str, loader: Any) -> object:
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError:
        return yaml.YAMLError  # refused, whichever of its kinds each parser names it


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_both_parsers_read_or_refuse_hostile_text_alike(name: str) -> None:
    text = HOSTILE[name]
    reading = _reading(text, yamlcore.CoreLoader)
    assert reading == _reading(text, PureCoreLoader)
    assert (reading is yaml.YAMLError) == (name in REFUSED)


def test_an_alias_bomb_is_refused_by_the_composer_on_libyaml() -> None:
    # The alias count lives in the composer, which must be PyYAML's (libyaml's own would build
    # the nodes without counting).
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    with pytest.raises(yaml.composer.ComposerError, match="alias bomb"):
        yaml.load("\n".join(lines) + "\n", Loader=yamlcore.CoreLoader)


@pytest.mark.parametrize("levels", [65, 999, 1_000, 1_001, 5_000])
def test_nesting_past_either_limit_counts_as_too_deep(levels: int) -> None:
    # libyaml's scanner stops at its own limit before the events reach MAX_DEPTH.
    for text in ("a: " + "[" * levels + "]" * levels, "- " * levels + "x"):
        assert files.yaml_depth(text) > files.MAX_DEPTH
