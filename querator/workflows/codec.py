"""Arguments and results of steps and workflows, as JSON, through pydantic.

Each parameter is validated and dumped with a ``pydantic.TypeAdapter`` of its
annotation (``Any`` when unannotated), so models, dataclasses and JSON types
round-trip. ``*args`` of type ``T`` is ``tuple[T, ...]``; ``**kwargs`` is
``dict[str, T]``. Unannotated values decode as plain JSON (a tuple comes back
as a list).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import typing
from collections.abc import Callable
from typing import Any

from pydantic import PydanticSchemaGenerationError, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from querator.errors import InvalidArgument
from querator.model_bases import validation_message
from querator.queue.validation import MAX_PAYLOAD

__all__ = ["Codec"]

_CODEC_ERRORS = (ValidationError, PydanticSerializationError, TypeError, ValueError)


class Codec:
    """Encodes the arguments and result of one function (``where`` names it in errors)."""

    def __init__(self, fn: Callable[..., Any], where: str) -> None:
        self._fn = fn
        self._where = where
        self._signature = inspect.signature(fn)
        self._params: dict[str, TypeAdapter[Any]] | None = None
        self._result: TypeAdapter[Any] | None = None
        self._hints: dict[str, Any] = {}
        """Each parameter's annotation (as its adapter has it), and ``return``'s."""
        self._plain: tuple[tuple[str, Any, TypeAdapter[Any]], ...] | None = None
        """Each parameter's name, annotation and adapter when every one is a plain
        positional-or-keyword parameter (None: some other kind)."""
        # A forward reference that does not resolve yet is resolved at first use.
        with contextlib.suppress(NameError):
            self._build()

    def _build(self) -> None:
        hints = typing.get_type_hints(self._fn)
        params: dict[str, TypeAdapter[Any]] = {}
        annotations: dict[str, Any] = {"return": hints.get("return", Any)}
        for name, param in self._signature.parameters.items():
            annotation: Any = hints.get(name, Any)
            if param.kind is inspect.Parameter.VAR_POSITIONAL:
                annotation = tuple[annotation, ...]
            elif param.kind is inspect.Parameter.VAR_KEYWORD:
                annotation = dict[str, annotation]
            params[name] = self._adapter(annotation, f"{self._where} parameter {name!r}")
            annotations[name] = annotation
        self._result = self._adapter(annotations["return"], f"{self._where} return type")
        self._hints = annotations
        self._params = params
        kinds = {param.kind for param in self._signature.parameters.values()}
        plain = kinds <= {inspect.Parameter.POSITIONAL_OR_KEYWORD}
        self._plain = (
            tuple((name, hints.get(name, Any), params[name]) for name in params) if plain else None
        )

    @staticmethod
    def _adapter(annotation: Any, what: str) -> TypeAdapter[Any]:
        try:
            return TypeAdapter(annotation)
        except PydanticSchemaGenerationError as exc:
            raise InvalidArgument(what, f"{annotation!r} cannot be serialised: {exc}") from exc

    def _adapters(self) -> tuple[dict[str, TypeAdapter[Any]], TypeAdapter[Any]]:
        if self._params is None or self._result is None:
            self._build()
        assert self._params is not None and self._result is not None
        return self._params, self._result

    def encode_args(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """JSON text of the bound arguments; InvalidArgument if they do not fit."""
        params, _ = self._adapters()
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise InvalidArgument(f"{self._where} arguments", str(exc)) from exc
        encoded = {}
        for name, value in bound.arguments.items():
            what = f"{self._where} argument {name!r}"
            dumped = self._dump(params[name], self._hints[name], value, what)
            if _non_finite(value) or _non_finite(dumped):
                raise InvalidArgument(what, NOT_FINITE)
            encoded[name] = dumped
        return _bounded(json.dumps(encoded, separators=(",", ":")), f"{self._where} arguments")

    def decode_args(self, text: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Positional and keyword arguments back from :meth:`encode_args` text."""
        return self._decode(json.loads(text))

    def decode_call(self, text: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """:meth:`decode_args`, checked against the signature: TypeError when
        they do not fit it (a parameter added since without a default)."""
        raw = json.loads(text)
        args, kwargs = self._decode(raw)
        if self._plain is None or len(args) != len(self._plain):
            self._signature.bind(*args, **kwargs)
        return args, kwargs

    def _decode(self, raw: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        params, _ = self._adapters()
        plain = self._plain
        if plain is not None and type(raw) is dict and len(raw) == len(plain):
            try:  # every parameter given: all positional, in order
                return tuple(
                    _validated(raw[name], hint, adapter) for name, hint, adapter in plain
                ), {}
            except KeyError:
                pass  # another name: the general way below
        values = {name: params[name].validate_python(raw[name]) for name in params if name in raw}
        bound = inspect.BoundArguments(self._signature, values)
        return bound.args, bound.kwargs

    def encode_result(self, value: Any) -> str:
        """JSON text of a result; InvalidArgument if it does not fit."""
        _, result = self._adapters()
        text = json.dumps(self._dump(result, self._hints["return"], value, f"{self._where} result"))
        return _bounded(text, f"{self._where} result")

    def decode_result(self, text: str) -> Any:
        """A result back from :meth:`encode_result` text; InvalidArgument if the
        stored value no longer fits (the annotation changed since)."""
        _, result = self._adapters()
        try:
            return result.validate_python(json.loads(text))
        except _CODEC_ERRORS as exc:
            raise InvalidArgument(
                f"{self._where} result", f"the stored value does not fit: {_explain(exc)}"
            ) from exc

    @staticmethod
    def _dump(adapter: TypeAdapter[Any], hint: Any, value: Any, what: str) -> Any:
        """``value`` (of annotation ``hint``) as a JSON value, through ``adapter``;
        as it is where the adapter would give it back unchanged (see :func:`_as_is`)."""
        if _as_is(value, hint):
            return value
        try:
            checked = adapter.validate_python(value)
            return adapter.dump_python(checked, mode="json", warnings="error")
        except _CODEC_ERRORS as exc:
            raise InvalidArgument(what, f"cannot be serialised: {_explain(exc)}") from exc


_EXACT = (str, int, float, bool)
"""Annotations whose adapter returns a JSON value of exactly that type as it is."""


def _validated(value: Any, hint: Any, adapter: TypeAdapter[Any]) -> Any:
    """``adapter.validate_python(value)``, skipped where it returns ``value`` itself
    (an ``Any`` parameter; a JSON string, integer, float or boolean under that
    very annotation)."""
    if hint is Any or (type(value) is hint and hint in _EXACT):
        return value
    return adapter.validate_python(value)


def _as_is(value: Any, hint: Any) -> bool:
    """Whether validating and dumping ``value`` under ``hint`` gives ``value`` back:
    a string, integer, float or boolean (exactly that type) under ``Any`` or under
    that very annotation; not a NaN or an infinity, which pydantic dumps as null)."""
    kind = type(value)
    if kind is float and not math.isfinite(value):
        return False
    return kind in _EXACT and (hint is Any or kind is hint)


NOT_FINITE = "must not hold NaN or an infinity (JSON has no such numbers)"
"""Why such an argument is refused: ``json.dumps`` would write ``NaN``, which no
other JSON reader accepts, and pydantic turns one under ``Any`` into null."""


def _non_finite(value: object) -> bool:
    """Whether ``value`` is, or its lists, tuples, sets and dicts hold, a float
    that is NaN or infinite (the input, or what pydantic dumped of it)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, list | tuple | set | frozenset):
        return any(_non_finite(one) for one in value)
    if isinstance(value, dict):
        return any(_non_finite(one) for one in value.values())
    return False


MAX_ENCODED = MAX_PAYLOAD - 64 * 1024
"""Bytes of JSON one call's arguments (or one result) may take: an item's payload
cap, less room for the record around them."""


def _bounded(text: str, what: str) -> str:
    size = len(text.encode())
    if size > MAX_ENCODED:
        raise InvalidArgument(
            what, f"take {size:,} bytes as JSON; at most {MAX_ENCODED:,} fit in a record"
        )
    return text


def _explain(exc: Exception) -> str:
    """One line for a codec error (pydantic's own text spans lines and links)."""
    if not isinstance(exc, ValidationError):
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    parts = []
    for error in exc.errors()[:3]:
        where = ".".join(str(part) for part in error["loc"])
        got = repr(error.get("input"))
        got = got if len(got) <= 40 else got[:37] + "..."
        parts.append(f"{where + ': ' if where else ''}{validation_message(error)} (got {got})")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")
