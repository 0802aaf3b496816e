"""The exceptions and exit codes every part of hugescope shares.

- ``HugescopeError`` (raised by the Rust core and by the Python layer): bad
  input, one clear message naming what and where. The CLI prints it as one
  line and exits with ``EXIT_USAGE``.
- ``Interrupted``: SIGINT or SIGTERM arrived. It subclasses
  ``KeyboardInterrupt`` so every ``except KeyboardInterrupt`` / ``finally``
  cleanup runs for both signals, and the Rust core's long calls (which poll
  for signals while they work) stop within a second and raise it. The CLI
  exits with ``128 + signal``, as a shell would report.
- ``RunFailed``: work that ran but did not succeed (a measured program
  exited non-zero, was killed or timed out). Exit code ``EXIT_FAILURE``.
"""

from __future__ import annotations

import signal

from ._core import HugescopeError

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


class Interrupted(KeyboardInterrupt):
    """A stop requested by a signal (SIGINT or SIGTERM)."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class RunFailed(Exception):
    """Work that ran but failed (a measured program's failure, a timeout)."""


__all__ = ["HugescopeError", "Interrupted", "RunFailed", "EXIT_OK", "EXIT_FAILURE", "EXIT_USAGE"]
