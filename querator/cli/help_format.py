"""How options read in ``--help``: a flag shows no value, a value option shows its
own name as the value (``--port PORT``) unless it declares a ``metavar``.

Typer's default labels every option with its Python type (``--version <bool>``,
``--help <bool>``, ``--url <str>``). :class:`CliGroup` is the group class of
every ``querator`` command group; it sets the labels on the commands it
resolves and on its own options, and gives every command that takes ``--url``
a ``--namespace`` (:data:`NAMESPACE_META` holds it for the ``--url`` callback).
"""

from __future__ import annotations

from typing import Annotated

import typer
from typer import _click
from typer.core import TyperGroup, TyperOption

__all__ = ["NAMESPACE_META", "CliGroup", "label_options"]

NAMESPACE_META = "querator.namespace"
"""Where ``--namespace`` leaves its value in the click context's ``meta``."""


def _remember_namespace(ctx: typer.Context, value: str | None) -> None:
    ctx.meta[NAMESPACE_META] = value


def _namespace_parameter() -> _click.core.Parameter:
    """The ``--namespace`` option, made by typer from a declaration (one object,
    shared by every command: it keeps nothing of its own)."""
    probe = typer.Typer()

    @probe.command()
    def _probe(
        namespace: Annotated[
            str | None,
            typer.Option(
                "--namespace",
                envvar="QUERATOR_NAMESPACE",
                metavar="NAMESPACE",
                is_eager=True,
                expose_value=False,
                callback=_remember_namespace,
                help="Namespace of the store (default: the URL's ?namespace=, else default).",
            ),
        ] = None,
    ) -> None:
        """Only declares the option."""

    params = typer.main.get_command(probe).params
    return next(param for param in params if param.name == "namespace")


_NAMESPACE = _namespace_parameter()


def _add_namespace_option(command: _click.core.Command) -> None:
    names = {param.name for param in command.params}
    if "url" in names and "namespace" not in names:
        command.params.append(_NAMESPACE)


def label_options(params: list[_click.Parameter]) -> None:
    """Give each option of ``params`` the metavar its help shows (see the module doc)."""
    for param in params:
        if not isinstance(param, TyperOption) or param.metavar is not None:
            continue
        param.metavar = "" if param.is_flag or param.count else (param.name or "value").upper()


class CliGroup(TyperGroup):
    """A command group whose commands' options read as :func:`label_options` says."""

    def get_params(self, ctx: _click.Context) -> list[_click.Parameter]:
        """The group's options (``--help``, ``--version``), labelled."""
        params = super().get_params(ctx)
        label_options(params)
        return params

    def get_command(self, ctx: _click.Context, cmd_name: str) -> _click.Command | None:
        """The command ``cmd_name``, its options labelled."""
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _add_namespace_option(command)
            label_options(command.get_params(ctx))
        return command
