"""scipy's modules, each imported on first use.

Only the analysis package touches scipy, and only for continuous scores, bootstraps and the
best-of-N model: the gate on pass/fail scores, most CLI calls and the action's start-up reach
their answer (or their first model request) without paying for scipy's import (about 1.5 s of
CPU)."""

from __future__ import annotations

import importlib
from typing import Any


class _LazyModule:
    def __init__(self, name: str) -> None:
        self._name = name
        self._module: Any = None

    def __getattr__(self, attr: str) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)


integrate: Any = _LazyModule("scipy.integrate")
stats: Any = _LazyModule("scipy.stats")
