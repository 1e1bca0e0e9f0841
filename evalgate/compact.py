"""Pydantic models that share one set of their field names (see :class:`Compact`)."""

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Self

from pydantic import BaseModel


class Compact(BaseModel):
    """A model made by the thousand (a run of 10,000 cases holds 10,000 or more of each: its
    cases, their results, their outcomes).

    Pydantic gives every instance its own set of the fields it was given, which for an outcome
    costs five times its values (2.2 KB of 2.7 KB), and 728 bytes for a case. Nothing in
    evalgate asks which fields were set (no ``exclude_unset``), so every instance of a class
    shares one set of all its fields instead: it is never changed, since setting a field adds
    a name that is already in it, and ``model_copy`` copies it.
    """

    def model_post_init(self, context: Any, /) -> None:
        object.__setattr__(self, "__pydantic_fields_set__", _all_fields(type(self)))

    @classmethod
    def checked(cls, **values: Any) -> Self:
        """An instance of values that its maker has checked field by field already, built
        without pydantic's validation: what ``model_construct`` does, for a model with no
        aliases, no extras and no private attributes, less its cost (it is slower than
        validating). About 1 µs an instance against 5 µs validated, for the reader that makes
        20,000 cases before a run's first call. Every field is given, none more."""
        fields = _all_fields(cls)
        if len(values) != len(fields) or not fields.issuperset(values):
            raise TypeError(f"{cls.__name__}.checked takes every field: {sorted(fields)}")
        made = cls.__new__(cls)
        object.__setattr__(made, "__dict__", values)
        object.__setattr__(made, "__pydantic_fields_set__", fields)
        object.__setattr__(made, "__pydantic_extra__", None)
        object.__setattr__(made, "__pydantic_private__", None)
        return made


@contextmanager
def cycles_uncollected() -> Iterator[None]:
    """The cycle collector paused while a file becomes thousands of models (its cases, a run's
    results): reading makes a few containers each and no cycle, yet every 700 of them start
    a pass over what is alive, for nothing found (a fifth of the time to read 20,000 cases, a
    tenth of `report`'s on their run). Restored after, as it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_FIELDS: dict[type[BaseModel], set[str]] = {}


def _all_fields(cls: type[BaseModel]) -> set[str]:
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = _FIELDS[cls] = set(cls.model_fields)
    return fields


__all__ = ["Compact", "cycles_uncollected"]
