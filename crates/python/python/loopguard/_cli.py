"""The ``loopguard`` command, installed with the package: the whole command
line of the Rust binary (``serve``, ``replay``, ``import``, ``eval``,
``tune``, ``models``, ``demo``, ...), run in this process by the extension
module. ``loopguard --help`` lists the commands."""

from __future__ import annotations

import sys

from . import _loopguard


def main() -> None:
    """Runs ``loopguard`` with this process's arguments and exits with its
    status."""
    sys.exit(_loopguard.run_cli(sys.argv))


if __name__ == "__main__":
    main()
