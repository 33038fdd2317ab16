"""The workflow the TypeScript client's tests start (served with ``--app``,
run by ``querator worker``)."""

from querator.workflows import (
    RetryPolicy,
    close_stream,
    recv,
    saga,
    set_event,
    step,
    wait_for_event,
    workflow,
    write_stream,
)


@step(name="ts.shout")
def shout(text: str) -> str:
    """Upper-case ``text``."""
    return text.upper()


@workflow(name="ts.greet", queue="ts.flows")
def greet(name: str, punctuation: str = "!") -> str:
    """``HELLO, <NAME>!`` through one step."""
    return shout(f"hello, {name}") + punctuation


@step(name="ts.reserve")
def reserve(trip: str) -> str:
    """A reservation, undone by :func:`release` when the saga fails."""
    return f"R-{trip}"


@reserve.compensate(name="ts.release")
def release(trip: str, reservation: str) -> None:
    """Undo :func:`reserve`."""


@step(name="ts.pay", retry=RetryPolicy(max_attempts=1))
def pay(trip: str) -> str:
    """A payment that is always declined."""
    raise RuntimeError(f"card declined for {trip}")


@saga(name="ts.trip", queue="ts.flows")
def trip(name: str) -> str:
    """Reserve, then pay: the payment fails, so the reservation is released."""
    return reserve(name) + pay(name)


@workflow(name="ts.chat", queue="ts.flows")
def chat(name: str) -> object:
    """Talks with the TypeScript client: publishes a status, logs to a stream,
    waits for a ``reply`` message, then for the event ``ts.go.<name>``."""
    set_event("status", {"waiting_for": "reply"})
    write_stream("log", f"hello {name}")
    answer = recv("reply", timeout=300)
    write_stream("log", answer)
    set_event("status", {"waiting_for": "event"})
    event = wait_for_event(f"ts.go.{name}", timeout=300)
    write_stream("log", event)
    close_stream("log")
    return {"answer": answer, "event": event}
