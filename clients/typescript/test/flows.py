"""The workflow the TypeScript client's tests start (served with ``--app``,
run by ``querator worker``)."""

from querator.workflows import RetryPolicy, saga, step, workflow


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
