"""Spark stages through Spark Connect: a local server started from the pip package."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from querator import Querator
from querator.spark import SparkResource, SparkStage, is_committed, spark_step
from querator.workflows import Worker, start, workflow

SPARK_HOME = Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``sc://127.0.0.1:<port>`` of a Spark Connect server run for this module."""
    assert (SPARK_HOME / "sbin" / "start-connect-server.sh").exists()
    assert list((SPARK_HOME / "jars").glob("spark-connect_*.jar")), "no connect jar shipped"
    port = _free_port()
    logs = tmp_path_factory.mktemp("connect")
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOG_DIR": str(logs),
        "SPARK_PID_DIR": str(logs),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    with open(logs / "server.log", "wb") as out:
        server = subprocess.Popen(
            [
                "bash",
                str(SPARK_HOME / "sbin" / "start-connect-server.sh"),
                "--wait",
                "--master",
                "local[2]",
                "--conf",
                f"spark.connect.grpc.binding.port={port}",
                "--conf",
                "spark.connect.grpc.binding.address=127.0.0.1",
                "--conf",
                "spark.ui.enabled=false",
                "--conf",
                "spark.sql.shuffle.partitions=2",
                "--driver-memory",
                "512m",
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        end = time.monotonic() + 120
        while True:
            assert server.poll() is None, (logs / "server.log").read_text()[-3000:]
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < end, (logs / "server.log").read_text()[-3000:]
                time.sleep(0.2)
        yield f"sc://127.0.0.1:{port}"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)


@spark_step(name="tc.numbers")
def tc_numbers(stage: SparkStage, n: int) -> int:
    assert stage.output is not None
    stage.spark.range(n).selectExpr("id", "id * id AS sq").write.mode("overwrite").parquet(
        stage.output
    )
    return n


@spark_step(name="tc.total")
def tc_total(stage: SparkStage, numbers: str) -> int:
    assert stage.output is not None
    df = stage.spark.read.parquet(stage.input(numbers))
    df.groupBy().sum("sq").withColumnRenamed("sum(sq)", "total").write.mode("overwrite").parquet(
        stage.output
    )
    return int(stage.spark.read.parquet(stage.output).first()["total"])  # type: ignore[index]


@workflow(name="tc.flow")
def tc_flow(root: str, n: int) -> int:
    tc_numbers(n, output=f"{root}/numbers")
    return tc_total(f"{root}/numbers", output=f"{root}/total")


def test_stages_run_through_spark_connect(connect_url: str, tmp_path: Path) -> None:
    resource = SparkResource(remote=connect_url)
    assert resource.is_connect
    with Querator(f"sqlite:///{tmp_path / 'connect.db'}") as q:
        worker = Worker(
            q, [tc_flow, tc_numbers, tc_total], poll_timeout=0.5, resources={"spark": resource}
        )
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        try:
            root = str(tmp_path / "out")
            assert start(q, tc_flow, root, 10).result(timeout=120) == sum(i * i for i in range(10))
        finally:
            worker.stop()
            thread.join(timeout=30)
    assert not resource.started  # the worker stopped its session
    assert is_committed(f"{root}/numbers") and is_committed(f"{root}/total")
