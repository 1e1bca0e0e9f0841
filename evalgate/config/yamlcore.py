"""YAML 1.2's core schema for every YAML file evalgate reads (evalgate.yml and case files).

PyYAML resolves plain scalars by YAML 1.1, where ``yes``, ``No``, ``on`` and ``off`` are
booleans, ``012`` is octal, ``1:30`` is a base-60 number and ``2024-01-01`` a date: a case whose
answer is ``Yes`` or whose input is the country code ``NO`` would reach the model, or be expected,
as ``True`` or ``False``. YAML 1.2's core schema (what promptfoo's js-yaml reads, and what the
YAML spec has said since 2009) keeps them strings: only ``true``/``false`` (also ``True``,
``TRUE``...) are booleans, only ``null``, ``~`` and the empty value are null, integers are
decimal, ``0o`` octal or ``0x`` hex, floats as JSON writes them plus ``.inf`` and ``.nan``.
The merge key ``<<`` is kept, as js-yaml keeps it. Dates stay strings.

Aliases are counted as they are composed: a document stands for the nodes it holds with every
alias expanded, and one whose aliases expand past :data:`MAX_EXPANDED` nodes (and past
:data:`MAX_RATIO` times the nodes written) is refused before anything walks it. Ten anchors
nesting ten aliases each are a 1 KB file that stands for ten billion nodes ("billion laughs"):
PyYAML shares the nodes, but every reader after it (hashes, checks, templates) walks them all.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import yaml

# The nodes a YAML document may stand for once its aliases are expanded, beyond those written
# (a case file that reuses a shared block through aliases stays far below both bounds).
MAX_EXPANDED = 100_000
MAX_RATIO = 10

_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)


def _safe_base() -> type[yaml.SafeLoader]:
    """PyYAML's safe loader, on libyaml's scanner and parser where PyYAML was built with it.

    libyaml scans and parses at about a tenth of the cost per character of PyYAML's own reader
    and scanner; composing, resolving and constructing stay PyYAML's, so every rule below holds
    on either parser. Composer comes first so that its node building, which counts aliases,
    is the one that runs rather than libyaml's."""
    if not yaml.__with_libyaml__:  # pragma: no cover - a PyYAML built without libyaml
        return yaml.SafeLoader
    from yaml import _yaml

    parser: Any = _yaml.CParser
    composer, constructor, resolver = (
        yaml.composer.Composer,
        yaml.constructor.SafeConstructor,
        yaml.resolver.Resolver,
    )

    def __init__(self: Any, stream: str | bytes) -> None:
        if isinstance(stream, str):
            # libyaml takes a text as UTF-8, which an unpaired surrogate (a JSON string can
            # hold "\ud800") is not: refused as PyYAML's reader refuses it, a YAML error.
            try:
                stream.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise yaml.reader.ReaderError(
                    "<unicode string>",
                    exc.start,
                    ord(stream[exc.start]),
                    "unicode",
                    "special characters are not allowed",
                ) from None
        parser.__init__(self, stream)
        composer.__init__(self)
        constructor.__init__(self)
        resolver.__init__(self)

    base: type[yaml.SafeLoader] = type(
        "SafeBase", (composer, parser, constructor, resolver), {"__init__": __init__}
    )
    return base


if TYPE_CHECKING:
    SafeBase = yaml.SafeLoader
else:
    SafeBase = _safe_base()


class CoreLoader(SafeBase):
    """A safe loader (no Python objects) that reads plain scalars by the YAML 1.2 core schema
    (and ``<<`` as a merge key); ``012`` is twelve, ``0o12`` ten."""

    # PyYAML's resolvers are YAML 1.1's: start from none, add the core schema's below.
    yaml_implicit_resolvers = {}  # noqa: RUF012 - PyYAML copies it on the first add

    def compose_document(self) -> yaml.Node | None:
        # Per document: the nodes written, those aliases add, and each anchor's expanded size.
        self._written = self._expanded = 0
        self._sizes: dict[str, int] = {}
        return yaml.composer.Composer.compose_document(self)  # PyYAML's, on either parser

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        before = self._written + self._expanded
        node = yaml.composer.Composer.compose_node(self, parent, index)
        if isinstance(event, yaml.AliasEvent):
            self._expanded += self._sizes.get(str(event.anchor), 1)
        else:
            self._written += 1
            if event.anchor is not None:
                self._sizes[event.anchor] = self._written + self._expanded - before
        if self._expanded > max(MAX_EXPANDED, MAX_RATIO * self._written):
            raise yaml.composer.ComposerError(
                None,
                None,
                f"its aliases expand past {MAX_EXPANDED:,} nodes ({self._written:,} written, "
                "a YAML alias bomb); write the values out instead of nesting aliases",
                event.start_mark,
            )
        return node

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        value = str(self.construct_scalar(node))
        if value.startswith("0o"):
            return int(value[2:], 8)
        if value.startswith("0x"):
            return int(value[2:], 16)
        return int(value, 10)


for _tag, _pattern, _first in (
    ("tag:yaml.org,2002:bool", _BOOL, list("tTfF")),
    ("tag:yaml.org,2002:null", _NULL, ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:int", _INT, list("-+0123456789")),
    ("tag:yaml.org,2002:float", _FLOAT, list("-+.0123456789")),
    ("tag:yaml.org,2002:merge", re.compile(r"^<<$"), ["<"]),
):
    CoreLoader.add_implicit_resolver(_tag, _pattern, _first)
CoreLoader.add_constructor("tag:yaml.org,2002:int", CoreLoader.construct_yaml_int)


def load(text: str) -> Any:
    """A YAML document by the core schema (duplicate keys not checked: see config.load)."""
    return yaml.load(text, Loader=CoreLoader)  # a safe loader (no Python objects)


def compose(text: str) -> yaml.Node | None:
    """The node tree of a YAML document (for line numbers), tags by the core schema."""
    return yaml.compose(text, Loader=CoreLoader)
