"""The public surface of ``querator.spark``: named, documented, errors in the one tree."""

from __future__ import annotations

import inspect
from dataclasses import replace

import pytest

import querator.spark
from querator.errors import InvalidArgument, QueratorError
from querator.spark import SparkResource, SparkStage


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


def test_output_path_is_the_output_or_a_named_error() -> None:
    resource = SparkResource()
    stage = SparkStage(
        resource=resource, output="/data/x._staging/attempt-1", final="/data/x", step="s"
    )
    assert stage.output_path == "/data/x._staging/attempt-1"
    with pytest.raises(InvalidArgument) as err:
        _ = replace(stage, output=None, final=None).output_path
    assert err.value.field == "output"
    assert "'s'" in str(err.value)
