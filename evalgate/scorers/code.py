"""The python scorer: a ``module:function`` of the user's.

The function takes ``(expected, reply_text)`` and returns a number in [0, 1], a bool, a
``(answer, score, format_ok)`` tuple, or a dict with those keys.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evalgate.config.models import PythonScorer
from evalgate.errors import ConfigError, UserError
from evalgate.scorers.base import Score, Scorer


def build(config: PythonScorer, base_dir: Path) -> Scorer:
    module_name, _, attr = config.function.partition(":")
    # The user's scorer module lives beside evalgate.yml.
    if str(base_dir) not in sys.path:
        sys.path.insert(0, str(base_dir))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            f"cannot import scorer module {module_name!r}: {exc}",
            where="scorer.function",
            fix=f"put {module_name}.py beside evalgate.yml or on PYTHONPATH",
        ) from None
    func = getattr(module, attr, None)
    if not callable(func):
        raise ConfigError(f"{module_name} has no function {attr!r}", where="scorer.function")

    def score(expected: Any, text: str) -> Score:
        result = func(expected, text)
        try:
            if isinstance(result, Score):
                return result
            if isinstance(result, bool | int | float):
                return Score(answer=text, score=float(result), format_ok=True)
            if isinstance(result, tuple):
                answer, value, format_ok = result
                return Score(answer=answer, score=float(value), format_ok=bool(format_ok))
            if isinstance(result, dict):
                return Score.model_validate(result)
        except (ValidationError, ValueError, TypeError) as exc:
            raise UserError(
                f"scorer {config.function} returned {result!r}: {exc}",
                fix="return a score in [0, 1], (answer, score, format_ok) or a dict",
            ) from None
        raise UserError(
            f"scorer {config.function} returned {type(result).__name__}",
            fix="return a score in [0, 1], (answer, score, format_ok) or a dict",
        )

    return score
