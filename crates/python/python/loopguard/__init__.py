"""loopguard: detect and stop loops in multi-agent LLM runs, in-process.

Feed a :class:`Guard` each event of a run (a dict in the trace contract's
shape: ``handoff``, ``tool_call``, ``failure``, ``transition``, ...) as it
happens, and act on the :class:`Decision` before the next step runs::

    >>> import loopguard
    >>> guard = loopguard.Guard(semantic=False)
    >>> for hop in [("planner", "coder"), ("coder", "planner")] * 2:
    ...     decision = guard.observe(
    ...         {"type": "handoff", "task": "T", "from": hop[0], "to": hop[1]})
    >>> decision.action
    'break_cycle'
    >>> decision.detections[0].kind
    'agent_pair'

A bad event raises :class:`EventError` naming the field, and changes
nothing. ``await guard.aobserve(event)`` decides off the event loop.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Dict

from ._loopguard import (
    ConfigError,
    Decision,
    Detection,
    EventError,
    LoopguardError,
    StoreError,
    __version__,
)
from ._loopguard import Guard as _NativeGuard

__all__ = [
    "ConfigError",
    "Decision",
    "Detection",
    "EventError",
    "Guard",
    "LoopguardError",
    "StoreError",
    "__version__",
]


class Guard(_NativeGuard):
    """The loop detector, in-process (see :class:`loopguard._loopguard.Guard`).

    ``Guard(config=None, store="memory", semantic=True)``: ``config`` is
    ``None`` (the defaults), a TOML file's path, or a dict of the same
    sections; ``store`` is ``"memory"``, ``"sqlite://PATH"`` or
    ``"postgres://..."``; ``semantic=False`` turns the embedding model off.

    Thread-safe: one engine behind the guard, the GIL released while it
    works. Use it as a context manager (or call :meth:`close`) so a
    durable store has committed everything when the block ends.
    """

    async def aobserve(self, event: Dict[str, Any]) -> Decision:
        """:meth:`observe` for asyncio: the engine runs on the loop's default
        executor, so the event loop keeps running meanwhile.

        >>> import asyncio, loopguard
        >>> guard = loopguard.Guard(semantic=False)
        >>> event = {"type": "handoff", "task": "T", "from": "a", "to": "b"}
        >>> asyncio.run(guard.aobserve(event)).action
        'none'
        """
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, functools.partial(self.observe, event))

    async def aobserve_json(self, line: str) -> Decision:
        """:meth:`observe_json` for asyncio (see :meth:`aobserve`)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, functools.partial(self.observe_json, line))
