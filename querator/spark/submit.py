"""``SparkSubmit``: a PySpark application run by ``spark-submit`` as a detached process.

A submitter for :meth:`SparkStage.submit_once <querator.spark.SparkStage.submit_once>`:
the driver is not the worker, as in cluster mode. Each submission gets a job
directory ``<jobs_dir>/<tag>.<random>`` (its id), holding ``job.json`` (tag,
command), ``pid.json`` (the job's pid and start time), ``output.log`` and, when
it ended, ``exit.json`` (exit code). The job runs in a session of its own, so
it outlives the worker that submitted it; ``wait`` polls those files, so any
process on the machine can wait for it. ``submit`` finds a running or
succeeded job of the same tag before starting one.

It runs on the machine of the worker (``--master local[n]`` by default, or any
master for client-mode drivers); for real clusters write the same three
callables around the cluster's API (YARN, Livy, Databricks), with the tag as
the application tag or job name.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from querator.errors import InvalidArgument
from querator.spark import launcher
from querator.spark.session import driver_conf, local_ip
from querator.spark.submission import ExternalJobFailed

__all__ = ["JobState", "SparkSubmit", "SubmittedJob"]

log = logging.getLogger("querator.spark")

JobState = Literal["running", "succeeded", "failed", "cancelled", "lost"]
"""``lost``: the job's process is gone without an exit code (killed, machine rebooted)."""

JOB_FILE = "job.json"
CANCEL_FILE = "cancelled"
LAUNCH_LOG = "launcher.log"
LAUNCH_TIMEOUT = 30.0
"""Seconds the launcher may take to fork and record the job's pid."""
LOG_TAIL = 8
"""Lines of the job's output quoted in :class:`ExternalJobFailed`."""


@dataclass(frozen=True)
class SubmittedJob:
    """A job that ended with exit code 0 (what :meth:`SparkSubmit.wait` returns)."""

    job_id: str
    """Its job directory."""
    tag: str
    exit_code: int
    log: str
    """The path of its output (stdout and stderr)."""


def _spark_home(given: str | Path | None) -> Path:
    if given is not None:
        return Path(given)
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    import pyspark

    return Path(pyspark.__file__).resolve().parent  # the pip package ships bin/spark-submit


class SparkSubmit:
    """``spark-submit [options] script args`` as a detached job, for ``submit_once``.

    ``script``: the PySpark application; ``args``: its arguments (typically
    ``stage.output``, where it writes). ``jobs_dir``: where job directories are
    made (local). ``master``: ``--master`` (``local[1]`` by default); ``conf``:
    ``--conf`` pairs; ``spark_home``: where ``bin/spark-submit`` is (default
    ``$SPARK_HOME``, else the ``pyspark`` package); ``env``: extra environment
    (the job also gets ``QUERATOR_SUBMISSION_TAG`` and ``QUERATOR_JOB_DIR``);
    ``poll_interval``: seconds between two checks in :meth:`wait`.

    ```python
    job = SparkSubmit("jobs/report.py", [stage.output], jobs_dir="/var/lib/etl/jobs")
    done = stage.submit_once(job.submit, job.wait, cancel=job.cancel)
    ```
    """

    def __init__(
        self,
        script: str | Path,
        args: Sequence[str] = (),
        *,
        jobs_dir: str | Path,
        master: str = "local[1]",
        conf: Mapping[str, str] | None = None,
        spark_home: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        poll_interval: float = 0.25,
    ) -> None:
        if poll_interval <= 0:
            raise InvalidArgument("poll_interval", "must be positive")
        self.script = Path(script).resolve()
        self.args = [str(a) for a in args]
        self.jobs_dir = Path(jobs_dir).resolve()
        self.master = master
        self.conf = dict(conf or {})
        self.spark_home = _spark_home(spark_home)
        self.env = dict(env or {})
        self.poll_interval = poll_interval

    def command(self, tag: str) -> list[str]:
        """The ``spark-submit`` command line of a submission tagged ``tag``."""
        conf = [
            item
            for key, value in driver_conf(self.master, self.conf).items()
            for item in ("--conf", f"{key}={value}")
        ]
        submit = str(self.spark_home / "bin" / "spark-submit")
        return [submit, "--master", self.master, "--name", tag, *conf, str(self.script), *self.args]

    def submit(self, tag: str) -> str:
        """Start the job (unless one of ``tag`` runs or succeeded: its id); its id."""
        found = self.find(tag)
        if found is not None:
            log.info("spark-submit: job %s of tag %s exists; not submitting again", found, tag)
            return found
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        job_dir = self.jobs_dir / f"{tag}.{secrets.token_hex(4)}"
        job_dir.mkdir()
        command = self.command(tag)
        launcher.write_json(
            job_dir / JOB_FILE,
            {"tag": tag, "command": command, "submitted_at": datetime.now(UTC).isoformat()},
        )
        env = {
            **os.environ,
            "SPARK_HOME": str(self.spark_home),
            "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
            **local_ip(self.master),
            **self.env,
            "QUERATOR_SUBMISSION_TAG": tag,
            "QUERATOR_JOB_DIR": str(job_dir),
        }
        try:
            with open(job_dir / LAUNCH_LOG, "wb") as err:
                launched = subprocess.run(
                    [sys.executable, launcher.__file__, str(job_dir), *command],
                    cwd=job_dir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=err,
                    stderr=err,
                    start_new_session=True,
                    timeout=LAUNCH_TIMEOUT,
                    check=False,
                )
        except (OSError, subprocess.SubprocessError) as exc:
            raise ExternalJobFailed(str(job_dir), f"could not be launched: {exc}") from exc
        if launched.returncode != 0 or not (job_dir / launcher.PID_FILE).exists():
            raise ExternalJobFailed(
                str(job_dir), f"could not be launched: {_tail(job_dir / LAUNCH_LOG)}"
            )
        log.info("spark-submit: started job %s (tag %s)", job_dir, tag)
        return str(job_dir)

    def find(self, tag: str) -> str | None:
        """The newest job of ``tag`` that runs or succeeded, if any."""
        if not self.jobs_dir.is_dir():
            return None
        candidates = [
            d
            for d in self.jobs_dir.iterdir()
            if d.name.startswith(f"{tag}.") and _read(d / JOB_FILE).get("tag") == tag
        ]
        candidates.sort(key=lambda d: str(_read(d / JOB_FILE).get("submitted_at", "")))
        for job_dir in reversed(candidates):
            if self.state(str(job_dir)) in ("running", "succeeded"):
                return str(job_dir)
        return None

    def state(self, job_id: str) -> JobState:
        """Where the job is now (from its job directory)."""
        job_dir = Path(job_id)
        ended = _read(job_dir / launcher.EXIT_FILE)
        if not ended:
            pid = _read(job_dir / launcher.PID_FILE)
            if pid and launcher.is_alive(int(pid["pid"]), pid.get("start")):
                return "running"
            ended = _read(job_dir / launcher.EXIT_FILE)  # it may have just ended
        if (job_dir / CANCEL_FILE).exists() and ended.get("code") != 0:
            return "cancelled"
        if not ended:
            return "lost"
        return "succeeded" if ended["code"] == 0 else "failed"

    def wait(self, job_id: str) -> SubmittedJob:
        """Block until the job ends: a :class:`SubmittedJob` when it succeeded,
        :class:`ExternalJobFailed` when it failed, was cancelled or was lost."""
        job_dir = Path(job_id)
        if not (job_dir / JOB_FILE).exists():
            raise ExternalJobFailed(job_id, "no such job")
        while (state := self.state(job_id)) == "running":
            time.sleep(self.poll_interval)
        ended = _read(job_dir / launcher.EXIT_FILE)
        output = job_dir / launcher.LOG_FILE
        if state != "succeeded":
            code = ended.get("code")
            raise ExternalJobFailed(
                job_id, f"{state} (exit code {code}); output ends:\n{_tail(output)}"
            )
        tag = str(_read(job_dir / JOB_FILE).get("tag", ""))
        return SubmittedJob(job_id=job_id, tag=tag, exit_code=0, log=str(output))

    def cancel(self, job_id: str) -> None:
        """Stop the job (SIGKILL to its process group); it then ends ``cancelled``."""
        job_dir = Path(job_id)
        (job_dir / CANCEL_FILE).touch()
        pid = _read(job_dir / launcher.PID_FILE)
        if pid and launcher.is_alive(int(pid["pid"]), pid.get("start")):
            log.info("spark-submit: cancelling job %s", job_id)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(pid["pid"]), signal.SIGKILL)

    def __repr__(self) -> str:
        return f"<SparkSubmit {self.script.name} on {self.master}>"


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no output)"
    return "\n".join(lines[-LOG_TAIL:])
