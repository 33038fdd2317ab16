"""The public surface of ``querator.spark``: named, documented, errors in the one tree."""

from __future__ import annotations

import inspect
from dataclasses import replace
from pathlib import Path

import pytest

import querator.spark
from querator.errors import InvalidArgument, QueratorError
from querator.spark import SparkResource, SparkStage, SparkSubmit
from querator.spark.session import driver_conf, local_ip


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


@pytest.mark.parametrize(
    ("master", "conf", "expected"),
    [
        (
            "local[*]",
            {},
            {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"},
        ),
        (
            "local",
            {"x": "1"},
            {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1", "x": "1"},
        ),
        (
            "local[2]",
            {"spark.driver.bindAddress": "0.0.0.0"},
            {"spark.driver.bindAddress": "0.0.0.0", "spark.driver.host": "127.0.0.1"},
        ),
        ("spark://h:7077", {"x": "1"}, {"x": "1"}),
        ("yarn", {}, {}),
    ],
)
def test_local_drivers_bind_loopback_unless_the_conf_says_otherwise(
    master: str, conf: dict[str, str], expected: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert driver_conf(master, conf) == expected
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    assert local_ip(master) == (
        {"SPARK_LOCAL_IP": "127.0.0.1"} if master.startswith("local") else {}
    )
    monkeypatch.setenv("SPARK_LOCAL_IP", "10.0.0.1")  # the user's own choice wins
    assert local_ip(master) == {}


def test_a_local_submission_binds_loopback(tmp_path: Path) -> None:
    command = SparkSubmit(tmp_path / "job.py", jobs_dir=tmp_path).command("t")
    assert "spark.driver.bindAddress=127.0.0.1" in command
    assert "spark.driver.host=127.0.0.1" in command
