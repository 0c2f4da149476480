"""The ``loopguard-plugin-worker`` script: runs one detector plugin in a
process of its own for a guard that isolates its plugins (process
isolation, the default). A guard starts it as
``loopguard-plugin-worker plugin-worker LIBRARY [--memory-limit-mb MB]`` and
talks to it over its stdin and stdout; a crash of the plugin ends only this
process. Not meant to be run by hand."""

from __future__ import annotations

import sys
from typing import List, Optional

USAGE = "usage: loopguard-plugin-worker plugin-worker LIBRARY [--memory-limit-mb MB]"


def main(argv: Optional[List[str]] = None) -> int:
    """Parses the guard's arguments and serves the plugin until the guard
    closes the pipe: 0 then, 2 on bad arguments or a failed pipe."""
    args = sys.argv[1:] if argv is None else argv
    memory_limit_mb: Optional[int] = None
    if len(args) == 4 and args[0] == "plugin-worker" and args[2] == "--memory-limit-mb":
        try:
            memory_limit_mb = int(args[3])
        except ValueError:
            print(f"loopguard-plugin-worker: --memory-limit-mb {args[3]}: not a number",
                  file=sys.stderr)
            return 2
    elif len(args) != 2 or args[0] != "plugin-worker":
        print(USAGE, file=sys.stderr)
        return 2
    from ._loopguard import run_plugin_worker

    try:
        run_plugin_worker(args[1], memory_limit_mb)
    except OSError as err:
        print(f"loopguard-plugin-worker: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
