"""The three bases of querator's pydantic models, one per direction of data.

- :class:`InputModel`: what users give (``QueueSettings``, ``Item``,
  ``RetryPolicy``): unknown fields are rejected, and every validation error
  surfaces as :class:`querator.errors.InvalidArgument` naming the field, so bad
  input lands in the one error hierarchy.
- :class:`StoredModel`: what querator writes into the store and reads back
  (run records, step payloads, schedule state): unknown fields are accepted and
  kept, so a process of an older version reads what a newer one wrote (a rolling
  deploy), and writes such a record back without losing what it did not know.
- :class:`View`: what querator returns to users (``RunInfo``, ``QueueStats``):
  frozen values built by querator itself.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import ErrorDetails

from querator.errors import InvalidArgument

__all__ = ["InputModel", "StoredModel", "View", "validation_message"]


def validation_message(error: ErrorDetails) -> str:
    """The text of one pydantic error: a validator's own message as it raised it
    (pydantic prefixes it with ``Value error, ``), else pydantic's."""
    if error["type"] == "value_error" and "error" in error.get("ctx", {}):
        return str(error["ctx"]["error"])
    return error["msg"]


class InputModel(BaseModel):
    """A frozen model of user input: unknown fields rejected, numbers finite (no NaN
    or infinity), errors InvalidArgument."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or type(self).__name__
            raise InvalidArgument(field, validation_message(first)) from exc


class StoredModel(BaseModel):
    """A frozen model of a stored record: fields it does not know are kept, unused."""

    model_config = ConfigDict(frozen=True, extra="allow")


class View(BaseModel):
    """A frozen value querator returns (read-only for its users)."""

    model_config = ConfigDict(frozen=True)
