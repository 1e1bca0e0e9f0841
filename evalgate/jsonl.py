"""JSON Lines of records: the one reader for the ledger, the change ledger and the history."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError

from evalgate.errors import UserError, from_validation

Record = TypeVar("Record", bound=BaseModel)


def parse_lines(
    text: str, model: type[Record], where: str, what: str, fix: str
) -> list[tuple[int, Record]]:
    """Every non-blank line of ``text`` as a ``model``, with its line number; a line that is
    not one is a UserError at ``where:line`` saying ``what`` it should have been."""
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append((number, model.model_validate_json(line)))
        except ValidationError as exc:
            raise UserError(
                f"{what}: {from_validation(exc)}", where=f"{where}:{number}", fix=fix
            ) from None
    return records
