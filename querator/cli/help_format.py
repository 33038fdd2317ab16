"""How options read in ``--help``: a flag shows no value, a value option shows its
own name as the value (``--port PORT``) unless it declares a ``metavar``.

Typer's default labels every option with its Python type (``--version <bool>``,
``--help <bool>``, ``--url <str>``). :class:`CliGroup` is the group class of
every ``querator`` command group; it sets the labels on the commands it
resolves and on its own options.
"""

from __future__ import annotations

from typer import _click
from typer.core import TyperGroup, TyperOption

__all__ = ["CliGroup", "label_options"]


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
            label_options(command.get_params(ctx))
        return command
