"""Subcommands of the `hugescope` CLI: experiments. Registered by `cli.build_parser`."""

from __future__ import annotations


def add_commands(sub) -> None:
    """Add this module's subcommands to the CLI's subparsers."""
