"""The workflow the TypeScript client's tests start (served with ``--app``,
run by ``querator worker``)."""

from querator.workflows import step, workflow


@step(name="ts.shout")
def shout(text: str) -> str:
    """Upper-case ``text``."""
    return text.upper()


@workflow(name="ts.greet", queue="ts.flows")
def greet(name: str, punctuation: str = "!") -> str:
    """``HELLO, <NAME>!`` through one step."""
    return shout(f"hello, {name}") + punctuation
