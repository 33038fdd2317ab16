"""Stage outputs by location: write to staging, then commit (rename + ``_COMMITTED`` marker).

Layout of an output ``P`` (a directory):

- ``P._staging/attempt-<n>``: where attempt ``n`` of the stage writes. An
  attempt first deletes ``P._staging`` entirely (its own earlier output and
  that of crashed attempts), so a re-run always starts from nothing.
- ``P``: the committed output. It only ever appears by renaming a complete
  staging directory that already holds ``_COMMITTED`` (JSON: which run,
  position and attempt committed it, and the step's encoded result).

A committed output being replaced (a later run writing the same location) is
first moved aside into ``P._staging``, then the new one renamed into place:
readers may briefly find no ``P`` but never a half-written one.
"""

from __future__ import annotations

import os
import secrets
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field

from querator.errors import InvalidArgument
from querator.workflows.errors import WorkflowError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "MARKER",
    "CommitMarker",
    "HadoopStorage",
    "LocalStorage",
    "Storage",
    "UncommittedInput",
    "commit",
    "delete_output",
    "is_committed",
    "is_local_path",
    "read_marker",
    "staging_path",
    "staging_root",
    "storage_for",
]

MARKER = "_COMMITTED"


class UncommittedInput(WorkflowError):
    """A stage was asked to read a location that holds no committed output."""


class CommitMarker(BaseModel):
    """``P/_COMMITTED``: who committed ``P``, and the step's result then."""

    model_config = ConfigDict(frozen=True)

    step: str
    run_id: str | None = None
    position: int | None = None
    attempt: int = 0
    result: str | None = None
    """The step's encoded result: a re-run of the same step call returns it."""
    committed_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    def same_call(self, step: str, run_id: str | None, position: int | None) -> bool:
        """True when this marker was written by that step call of that run."""
        return run_id is not None and (self.step, self.run_id, self.position) == (
            step,
            run_id,
            position,
        )


class Storage(Protocol):
    """The few file operations the commit protocol needs."""

    def exists(self, path: str) -> bool:
        """True when a file or directory is at ``path``."""

    def read_text(self, path: str) -> str | None:
        """The file's text, or None when there is no file."""

    def write_text(self, path: str, text: str) -> None:
        """Write the file whole (readers never see half of it)."""

    def rename(self, src: str, dst: str) -> None:
        """Move ``src`` to ``dst`` (atomic where the file system allows)."""

    def delete(self, path: str) -> None:
        """Remove the file or directory tree; nothing when absent."""


def is_local_path(path: str) -> bool:
    """True for plain paths and ``file:`` URIs (:class:`LocalStorage`); False for
    other schemes (``hdfs://``, ``s3a://``, ``viewfs://`` …: :class:`HadoopStorage`)."""
    return urlparse(path).scheme in ("", "file")


def _local_path(path: str) -> Path:
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme else path)
    raise InvalidArgument("path", f"{path!r} is not a local path")


class LocalStorage:
    """Local (or network-mounted POSIX) files: ``rename`` is atomic."""

    def exists(self, path: str) -> bool:
        """See :meth:`Storage.exists`."""
        return _local_path(path).exists()

    def read_text(self, path: str) -> str | None:
        """See :meth:`Storage.read_text`."""
        try:
            return _local_path(path).read_text()
        except FileNotFoundError:
            return None

    def write_text(self, path: str, text: str) -> None:
        """See :meth:`Storage.write_text`."""
        target = _local_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}")
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)

    def rename(self, src: str, dst: str) -> None:
        """See :meth:`Storage.rename`."""
        target = _local_path(dst)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(_local_path(src), target)
        _fsync_dir(target.parent)

    def delete(self, path: str) -> None:
        """See :meth:`Storage.delete`."""
        target = _local_path(path)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target, ignore_errors=True)
        else:
            target.unlink(missing_ok=True)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class HadoopStorage:
    """Any Hadoop file system (``hdfs://``, ``s3a://``, ``gs://``, ``abfs://``) through
    the classic session's JVM. ``rename`` is atomic on HDFS; on object stores it
    is a copy, so there the ``_COMMITTED`` marker (written last inside the
    staging directory) is what readers must check (:func:`is_committed`)."""

    def __init__(self, spark: SparkSession) -> None:
        jvm: Any = spark._jvm  # classic sessions only (Spark Connect has no JVM)
        if jvm is None:
            raise InvalidArgument("spark", "HadoopStorage needs a classic (non-Connect) session")
        self._jvm = jvm
        self._gateway: Any = spark.sparkContext._gateway
        self._conf = spark._jsc.hadoopConfiguration()

    def _fs(self, path: str) -> tuple[Any, Any]:
        p = self._jvm.org.apache.hadoop.fs.Path(path)
        return p.getFileSystem(self._conf), p

    def exists(self, path: str) -> bool:
        """See :meth:`Storage.exists`."""
        fs, p = self._fs(path)
        return bool(fs.exists(p))

    def read_text(self, path: str) -> str | None:
        """See :meth:`Storage.read_text`."""
        fs, p = self._fs(path)
        if not fs.exists(p):
            return None
        stream = fs.open(p)
        try:
            reader = self._jvm.java.io.BufferedReader(
                self._jvm.java.io.InputStreamReader(stream, "UTF-8")
            )
            lines = []
            line = reader.readLine()
            while line is not None:
                lines.append(line)
                line = reader.readLine()
            return "\n".join(lines)
        finally:
            stream.close()

    def write_text(self, path: str, text: str) -> None:
        """See :meth:`Storage.write_text`: a hidden temporary file, then one rename
        over ``path`` (``FileContext.rename(..., OVERWRITE)``, atomic on HDFS)."""
        fs, p = self._fs(path)
        tmp = self._jvm.org.apache.hadoop.fs.Path(
            p.getParent(), f".{p.getName()}.{secrets.token_hex(4)}"
        )
        out = fs.create(tmp, True)
        try:
            out.write(bytearray(text.encode()))
        finally:
            out.close()
        try:
            self._replace(fs, tmp, p)
        except Exception:
            fs.delete(tmp, False)
            raise

    def _replace(self, fs: Any, src: Any, dst: Any) -> None:
        fs_api = self._jvm.org.apache.hadoop.fs
        try:
            context = fs_api.FileContext.getFileContext(dst.toUri(), self._conf)
        except Exception:  # no AbstractFileSystem for the scheme: delete, then rename
            fs.delete(dst, False)
            if not fs.rename(src, dst):
                raise OSError(f"rename {src} -> {dst} failed") from None
            return
        rename = getattr(fs_api, "Options$Rename")
        options = self._gateway.new_array(rename, 1)
        options[0] = rename.OVERWRITE
        context.rename(src, dst, options)

    def rename(self, src: str, dst: str) -> None:
        """See :meth:`Storage.rename`."""
        fs, s = self._fs(src)
        _, d = self._fs(dst)
        fs.mkdirs(d.getParent())
        if not fs.rename(s, d):
            raise OSError(f"rename {src} -> {dst} failed")

    def delete(self, path: str) -> None:
        """See :meth:`Storage.delete`."""
        fs, p = self._fs(path)
        fs.delete(p, True)


def storage_for(path: str, spark: SparkSession | None = None) -> Storage:
    """Local storage for plain paths and ``file:`` URIs; Hadoop storage for other
    schemes (needs a classic session)."""
    if is_local_path(path):
        return LocalStorage()
    if spark is None or getattr(spark, "_jvm", None) is None:
        raise InvalidArgument(
            "output",
            f"{path!r}: committing non-local outputs needs a classic session "
            "(Spark Connect stages commit local or mounted paths only)",
        )
    return HadoopStorage(spark)


def _clean(path: str) -> str:
    return path.rstrip("/") or path


def staging_root(final: str) -> str:
    """Where every attempt of the stage writing ``final`` stages."""
    return f"{_clean(final)}._staging"


def staging_path(final: str, attempt: int) -> str:
    """Where attempt ``attempt`` writes before committing to ``final``."""
    return f"{staging_root(final)}/attempt-{attempt}"


def _marker(path: str) -> str:
    return f"{_clean(path)}/{MARKER}"


def read_marker(storage: Storage, final: str) -> CommitMarker | None:
    """The marker of the committed output at ``final`` (None: nothing committed)."""
    text = storage.read_text(_marker(final))
    return CommitMarker.model_validate_json(text) if text else None


def is_committed(path: str, storage: Storage | None = None) -> bool:
    """True when ``path`` holds a committed output."""
    return (storage or storage_for(path)).exists(_marker(path))


def commit(storage: Storage, staging: str, final: str, marker: CommitMarker) -> None:
    """Publish ``staging`` as ``final``: marker first, then one rename.

    A crash before the rename leaves ``final`` as it was (the stage re-runs);
    after it, ``final`` is complete and carries the marker.
    """
    storage.write_text(_marker(staging), marker.model_dump_json())
    root = staging_root(final)
    if storage.exists(final):
        storage.rename(final, f"{root}/replaced-{secrets.token_hex(4)}")
    storage.rename(staging, final)
    storage.delete(root)


def delete_output(path: str, storage: Storage | None = None) -> bool:
    """Remove a committed output and its staging (compensations); True if it existed."""
    store = storage or storage_for(path)
    existed = store.exists(path)
    store.delete(_clean(path))
    store.delete(staging_root(path))
    return existed
