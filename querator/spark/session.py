"""Where Spark runs: settings (worker options or environment) and the per-worker session."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from querator.errors import InvalidArgument

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_MASTER",
    "LOCAL_DRIVER_CONF",
    "RESOURCE_KEY",
    "SparkResource",
    "SparkSettings",
    "default_resource",
    "driver_conf",
    "is_local_master",
    "local_ip",
]

log = logging.getLogger("querator.spark")

DEFAULT_MASTER = "local[*]"
RESOURCE_KEY = "spark"
"""The key of the :class:`SparkResource` in ``Worker(resources=...)``."""

ENV_MASTER = "QUERATOR_SPARK_MASTER"
ENV_REMOTE = "QUERATOR_SPARK_REMOTE"
ENV_CONF = "QUERATOR_SPARK_CONF"
ENV_APP_NAME = "QUERATOR_SPARK_APP_NAME"
LOOPBACK = "127.0.0.1"
LOCAL_DRIVER_CONF = {"spark.driver.bindAddress": LOOPBACK, "spark.driver.host": LOOPBACK}
"""What a local driver (``local``, ``local[n]``) binds and advertises unless the
conf says otherwise: the loopback interface, never the machine's network one."""


def is_local_master(master: str) -> bool:
    """True for the masters whose executors run in the driver's JVM (``local[...]``)."""
    return master == "local" or master.startswith(("local[", "local-cluster["))


def driver_conf(master: str, conf: Mapping[str, str]) -> dict[str, str]:
    """``conf`` with, for a local master, the driver bound to the loopback interface
    (:data:`LOCAL_DRIVER_CONF`; a key set in ``conf`` wins)."""
    if not is_local_master(master):
        return dict(conf)
    return {**LOCAL_DRIVER_CONF, **conf}


def local_ip(master: str) -> dict[str, str]:
    """The environment a local driver's JVM is launched with: ``SPARK_LOCAL_IP``
    (Spark's UI and its address lookup bind it) on the loopback interface, unless
    this process sets it."""
    if not is_local_master(master) or os.environ.get("SPARK_LOCAL_IP"):
        return {}
    return {"SPARK_LOCAL_IP": LOOPBACK}


@dataclass(frozen=True)
class SparkSettings:
    """Where Spark runs. Configuration, not code: the same stages run anywhere.

    ``remote`` (a Spark Connect URL, ``sc://host:port``) wins over ``master``
    (``local[*]``, ``local[2]``, ``spark://host:7077``, ``yarn``, ``k8s://...``).
    ``conf`` is extra Spark configuration (``spark.executor.memory`` ...).
    """

    master: str = DEFAULT_MASTER
    remote: str | None = None
    conf: Mapping[str, str] = field(default_factory=dict)
    app_name: str = "querator"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SparkSettings:
        """``QUERATOR_SPARK_MASTER``, ``QUERATOR_SPARK_REMOTE``, ``QUERATOR_SPARK_CONF``
        (a JSON object of strings) and ``QUERATOR_SPARK_APP_NAME``; unset ones default."""
        env = os.environ if environ is None else environ
        conf_text = env.get(ENV_CONF, "").strip()
        conf: dict[str, str] = {}
        if conf_text:
            try:
                raw = json.loads(conf_text)
            except ValueError as exc:
                raise InvalidArgument(ENV_CONF, f"is not JSON: {exc}") from exc
            if not isinstance(raw, dict):
                raise InvalidArgument(ENV_CONF, "must be a JSON object")
            conf = {str(k): str(v) for k, v in raw.items()}
        return cls(
            master=env.get(ENV_MASTER, "").strip() or DEFAULT_MASTER,
            remote=env.get(ENV_REMOTE, "").strip() or None,
            conf=conf,
            app_name=env.get(ENV_APP_NAME, "").strip() or "querator",
        )

    @property
    def is_connect(self) -> bool:
        """True when stages run through Spark Connect."""
        return self.remote is not None


class SparkResource:
    """One SparkSession per worker: created at the first Spark stage, reused by
    every later one, stopped when the worker stops (``close()``).

    Give it to the worker as ``Worker(q, fns, resources={"spark": SparkResource(...)})``;
    a worker without one gets a resource from the environment
    (:meth:`SparkSettings.from_env`) at its first Spark stage. The session is
    never pickled or sent anywhere: stages receive it in their process.
    ``stop_on_close=False`` keeps the session when a worker stops (for a
    session shared by several workers of one process; call :meth:`stop`).
    """

    def __init__(
        self,
        settings: SparkSettings | None = None,
        *,
        master: str | None = None,
        remote: str | None = None,
        conf: Mapping[str, str] | None = None,
        app_name: str | None = None,
        stop_on_close: bool = True,
    ) -> None:
        base = settings if settings is not None else SparkSettings.from_env()
        self.settings = SparkSettings(
            master=master if master is not None else base.master,
            remote=remote if remote is not None else base.remote,
            conf={**base.conf, **(conf or {})},
            app_name=app_name if app_name is not None else base.app_name,
        )
        self.stop_on_close = stop_on_close
        self._lock = threading.Lock()
        self._session: SparkSession | None = None

    @property
    def is_connect(self) -> bool:
        """True when stages run through Spark Connect."""
        return self.settings.is_connect

    @property
    def started(self) -> bool:
        """True once the session exists (a stage used it, or :meth:`session` was called)."""
        return self._session is not None

    def session(self) -> SparkSession:
        """The session, created on first use (thread-safe)."""
        with self._lock:
            if self._session is None:
                self._session = self._create()
            return self._session

    def _create(self) -> SparkSession:
        from pyspark.sql import SparkSession

        s = self.settings
        if s.remote is not None:
            # The Connect builder itself: the generic one marks the whole process as
            # Spark Connect (SPARK_CONNECT_MODE_ENABLED), breaking later classic sessions.
            from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

            log.info("spark: connecting to %s", s.remote)
            remote = RemoteSparkSession.builder.remote(s.remote).appName(s.app_name)
            for key, value in s.conf.items():
                remote = remote.config(key, value)
            connected: SparkSession = remote.getOrCreate()  # type: ignore[assignment]
            return connected
        builder = SparkSession.builder.appName(s.app_name)
        # pyspark launches the JVM with this process's environment.
        os.environ.update(local_ip(s.master))
        for key, value in driver_conf(s.master, s.conf).items():
            builder = builder.config(key, value)
        log.info("spark: starting a session on %s", s.master)
        session = builder.master(s.master).getOrCreate()
        log.info("spark: session ready (Spark %s)", session.version)
        return session

    def stop(self) -> None:
        """Stop the session (the next :meth:`session` creates a new one)."""
        with self._lock:
            session, self._session = self._session, None
        if session is not None:
            log.info("spark: stopping the session")
            session.stop()

    def close(self) -> None:
        """Called by the worker when it stops: :meth:`stop` unless ``stop_on_close=False``."""
        if self.stop_on_close:
            self.stop()

    def __repr__(self) -> str:
        where = self.settings.remote or self.settings.master
        return f"<SparkResource {where} {'started' if self.started else 'idle'}>"


_DEFAULT: list[SparkResource] = []
_DEFAULT_LOCK = threading.Lock()


def default_resource() -> SparkResource:
    """The process's resource for Spark steps called outside a worker (from the environment)."""
    with _DEFAULT_LOCK:
        if not _DEFAULT:
            _DEFAULT.append(SparkResource())
        return _DEFAULT[0]


def resource_from(resources: dict[str, Any] | None) -> SparkResource:
    """The worker's Spark resource, added (from the environment) when it has none."""
    if resources is None:
        return default_resource()
    found = resources.get(RESOURCE_KEY)
    if found is None:
        found = resources.setdefault(RESOURCE_KEY, SparkResource())
    if not isinstance(found, SparkResource):
        raise InvalidArgument("resources", f"{RESOURCE_KEY!r} must be a SparkResource")
    return found
