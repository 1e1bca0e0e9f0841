"""The json_schema scorer: the reply must be JSON valid against a schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

from evalgate import files
from evalgate.config.models import JsonSchemaScorer
from evalgate.errors import ConfigError
from evalgate.scorers.base import Score, Scorer


def build(config: JsonSchemaScorer, base_dir: Path) -> Scorer:
    schema = config.schema_
    if schema is None:
        assert config.schema_file is not None
        path = base_dir / config.schema_file
        try:
            schema = json.loads(files.read_text(path, "schema file", ConfigError))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"invalid JSON: {exc.msg}", where=f"{path}:{exc.lineno}") from None
        except (ValueError, RecursionError) as exc:
            raise ConfigError(f"JSON that cannot be read: {exc}"[:300], where=str(path)) from None
    try:
        validator_cls = jsonschema.validators.validator_for(schema)
        validator_cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ConfigError(f"invalid JSON schema: {exc.message}", where="scorer.schema") from None
    validator = validator_cls(schema)

    def score(expected: Any, text: str) -> Score:
        try:
            value = json.loads(text)
        except ValueError:
            return Score(answer=None, score=0.0, format_ok=False, reason="reply is not JSON")
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is not None:
            return Score(answer=None, score=0.0, format_ok=False, reason=error.message)
        if config.field is None:
            return Score(answer=json.dumps(value, sort_keys=True), score=1.0, format_ok=True)
        answer = value.get(config.field) if isinstance(value, dict) else None
        right = answer is not None and str(answer).strip().lower() == str(expected).lower()
        return Score(
            answer=None if answer is None else str(answer), score=float(right), format_ok=True
        )

    return score
