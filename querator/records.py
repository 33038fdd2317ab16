"""The base of querator's frozen value models.

Construction errors surface as :class:`querator.errors.InvalidArgument` (naming
the field) instead of pydantic's own exception, so every bad input lands in the
one error hierarchy.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from querator.errors import InvalidArgument


class Record(BaseModel):
    """A frozen pydantic model whose validation errors are InvalidArgument."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or type(self).__name__
            raise InvalidArgument(field, first["msg"]) from exc
