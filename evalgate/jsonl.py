"""JSON Lines of records: the one reader and writer for the ledger, the change ledger and the
history."""

from __future__ import annotations

from pathlib import Path
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


def append_record(path: Path, record: BaseModel) -> None:
    """Append one record as a line (the folder made if missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(record.model_dump_json() + "\n")
