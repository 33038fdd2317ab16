"""The public surface of ``querator.spark``: named, documented, errors in the one tree."""

from __future__ import annotations

import inspect

import querator.spark
from querator.errors import QueratorError


def test_every_public_name_and_method_has_a_docstring() -> None:
    missing = []
    for name in querator.spark.__all__:
        obj = getattr(querator.spark, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue  # constants and type aliases
        if not inspect.getdoc(obj):
            missing.append(name)
        for attr, member in vars(obj).items():
            public = not attr.startswith("_") and (
                inspect.isfunction(member) or isinstance(member, property)
            )
            if public and not inspect.getdoc(member):
                missing.append(f"{name}.{attr}")
    assert missing == []


def test_errors_descend_from_the_one_root() -> None:
    for name in querator.spark.__all__:
        obj = getattr(querator.spark, name)
        if inspect.isclass(obj) and issubclass(obj, Exception):
            assert issubclass(obj, QueratorError), name
    assert {"ExternalJobFailed", "UncommittedInput"} <= set(querator.spark.__all__)
