"""Line numbers for key paths in a YAML document, so validation errors can point at them."""

from __future__ import annotations

from collections.abc import Sequence

import yaml

from evalgate.config import yamlcore


def line_of(text: str, path: Sequence[str | int]) -> int | None:
    """The 1-based line of the deepest node of ``path`` found in the YAML ``text``."""
    try:
        node = yamlcore.compose(text)
    except yaml.YAMLError:
        return None
    line = None
    for key in path:
        if node is None:
            break
        line = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            found = None
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == str(key):
                    found = v
                    line = k.start_mark.line + 1
                    break
            node = found
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int):
            node = node.value[key] if 0 <= key < len(node.value) else None
            if node is not None:
                line = node.start_mark.line + 1
        else:
            node = None
    return line
