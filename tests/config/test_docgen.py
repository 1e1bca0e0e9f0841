"""docs/configuration.md is generated from the pydantic models and must stay current."""

from __future__ import annotations

from pathlib import Path

from evalgate.config.docgen import reference
from evalgate.config.models import Config, Suite

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_the_committed_reference_matches_the_models() -> None:
    assert DOC.read_text(encoding="utf-8") == reference(), (
        "docs/configuration.md is stale: run `python -m evalgate.config.docgen > docs/configuration.md`"
    )


def test_every_key_is_documented_with_a_meaning() -> None:
    text = reference()
    for model in (Config, Suite):
        for name, field in model.model_fields.items():
            assert f"| `{field.alias or name}` |" in text
    assert "|  |\n" not in text, "a key has no meaning: add a comment above it in config.py"


def test_every_key_whose_value_is_a_section_has_that_section() -> None:
    """A key shown as "(see its section)" names a model of its own: that model is documented."""
    from pydantic import BaseModel

    from evalgate.config.docgen import SECTIONS

    documented = {model for _, model, _ in SECTIONS}
    for _, model, _ in SECTIONS:
        for name, field in model.model_fields.items():
            value = field.default_factory() if field.default_factory else field.default  # type: ignore[call-arg]
            if isinstance(value, BaseModel):
                assert type(value) in documented, f"{model.__name__}.{name}: no section"
