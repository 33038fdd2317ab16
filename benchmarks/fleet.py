"""Agents in processes of their own, driven from the harness through pipes.

Every agent process imports only its own system, connects once, then runs the
commands it is sent (a method name and keyword arguments) one at a time and
sends back the result. ``Fleet.start`` sends a command to every agent at once
and ``Fleet.collect`` gathers the answers, so consumers and producers run side
by side while the harness watches the clock.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import traceback
from multiprocessing.connection import Connection
from typing import Any

from benchmarks.systems import SYSTEMS

_CTX = mp.get_context("spawn")
START_TIMEOUT = 120.0
"""Seconds an agent may take to import its system and connect."""


class AgentFailed(RuntimeError):
    """An agent raised; carries its traceback text."""


def _serve(system: str, dsn: str, conn: Connection) -> None:
    """The body of an agent process."""
    try:
        agent = SYSTEMS[system].agent(dsn)
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        return
    conn.send(("ok", None))
    try:
        while True:
            message = conn.recv()
            if message is None:
                return
            method, kwargs = message
            try:
                conn.send(("ok", getattr(agent, method)(**kwargs)))
            except NotImplementedError:
                conn.send(("unsupported", method))
            except BaseException:
                conn.send(("error", traceback.format_exc()))
    finally:
        agent.close()


class Unsupported(Exception):
    """The system cannot do what was asked (its cell stays empty)."""


class Fleet:
    """``count`` agent processes of one system on one database."""

    def __init__(self, system: str, dsn: str, count: int) -> None:
        self.system = system
        self._procs: list[Any] = []
        self._pipes: list[Connection] = []
        try:
            for _ in range(count):
                parent, child = _CTX.Pipe()
                proc = _CTX.Process(target=_serve, args=(system, dsn, child), daemon=True)
                proc.start()
                child.close()
                self._procs.append(proc)
                self._pipes.append(parent)
            for pipe in self._pipes:
                self._receive(pipe, START_TIMEOUT)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self._pipes)

    def start(self, method: str, agents: range | None = None, **kwargs: Any) -> list[int]:
        """Send a command to some agents (all by default); returns their indexes."""
        chosen = list(agents if agents is not None else range(len(self._pipes)))
        for index in chosen:
            self._pipes[index].send((method, kwargs))
        return chosen

    def collect(self, agents: list[int], timeout: float = 3600.0) -> list[Any]:
        """The answers of ``agents`` to their last command, in order.

        Every answer is read before the first failure is raised, so the pipes
        stay in step for the next command.
        """
        answers: list[Any] = []
        failure: Exception | None = None
        for index in agents:
            try:
                answers.append(self._receive(self._pipes[index], timeout))
            except (AgentFailed, Unsupported) as exc:
                failure = failure or exc
        if failure is not None:
            raise failure
        return answers

    def call(self, method: str, agents: range | None = None, **kwargs: Any) -> list[Any]:
        """Run a command on some agents (all by default) side by side; their results."""
        return self.collect(self.start(method, agents, **kwargs))

    def call_one(self, method: str, **kwargs: Any) -> Any:
        """Run a command on the first agent."""
        return self.call(method, range(1), **kwargs)[0]

    def _receive(self, pipe: Connection, timeout: float) -> Any:
        if not pipe.poll(timeout):
            raise AgentFailed(f"{self.system}: an agent did not answer within {timeout}s")
        try:
            status, value = pipe.recv()
        except EOFError as exc:
            raise AgentFailed(f"{self.system}: an agent process died") from exc
        if status == "unsupported":
            raise Unsupported(f"{self.system} cannot {value}")
        if status == "error":
            raise AgentFailed(f"{self.system} agent failed:\n{value}")
        return value

    def close(self) -> None:
        """Stop every agent process."""
        for pipe in self._pipes:
            with contextlib.suppress(BrokenPipeError, OSError):
                pipe.send(None)
        for proc in self._procs:
            proc.join(timeout=15)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
        for pipe in self._pipes:
            pipe.close()
        self._procs.clear()
        self._pipes.clear()
