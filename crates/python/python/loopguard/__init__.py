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
:func:`fetch_model` fetches the embedding model a default ``Guard()``
uses (once, into the user's cache directory) and says where it is.

Adapters for agent frameworks (the OpenAI Agents SDK, LangChain/LangGraph,
AutoGen AgentChat) are in :mod:`loopguard.integrations`; they raise
:class:`LoopDetected` when a decision says to stop.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from typing import Any, Dict, Optional

from . import _loopguard
from ._loopguard import (
    ConfigError,
    Decision,
    Detection,
    EventError,
    LoopguardError,
    ModelError,
    StoreError,
    UnknownTaskError,
    __version__,
    fetch_model,
)
from ._loopguard import Guard as _NativeGuard

# Before any guard starts: the model directory's rules ask where this
# package lives, and the model is fetched with this interpreter's pip.
_loopguard._locate(_loopguard.__file__, sys.executable or None)

__all__ = [
    "ConfigError",
    "Decision",
    "Detection",
    "EventError",
    "Guard",
    "LoopDetected",
    "LoopguardError",
    "ModelError",
    "StoreError",
    "UnknownTaskError",
    "__version__",
    "fetch_model",
    "stop_reason",
]


class Guard(_NativeGuard):
    """The loop detector, in-process (see :class:`loopguard._loopguard.Guard`).

    ``Guard(config=None, store="memory", semantic=True)``: ``config`` is
    ``None`` (the defaults), a TOML file's path, or a dict of the same
    sections; ``store`` is ``"memory"``, ``"sqlite://PATH"`` or
    ``"postgres://..."``; ``semantic=False`` turns the embedding model off.
    A model that cannot be fetched or loaded raises :class:`ModelError`.

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


class LoopDetected(LoopguardError):
    """A run stopped because loopguard said ``escalate`` or ``abort``.

    Raised by the adapters in :mod:`loopguard.integrations` (and usable by
    any orchestrator) with the decision that stopped the run as
    :attr:`decision`; the message is the first detection's reason.

    >>> import loopguard
    >>> guard = loopguard.Guard(semantic=False)
    >>> failure = {"type": "failure", "task": "T", "agent": "coder", "error": "E0308"}
    >>> decision = [guard.observe(failure) for _ in range(4)][-1]
    >>> error = loopguard.LoopDetected(decision)
    >>> error.decision.action, str(error)
    ('escalate', 'same error message as lines 1, 2 and 3')
    """

    decision: Decision
    """The decision that stopped the run."""

    def __init__(self, decision: Decision, message: Optional[str] = None) -> None:
        self.decision = decision
        super().__init__(message if message is not None else stop_reason(decision))


def stop_reason(decision: Decision) -> str:
    """A decision's reason in one line: its detections' reasons, else its action.

    >>> import loopguard
    >>> guard = loopguard.Guard(semantic=False)
    >>> loopguard.stop_reason(guard.observe(
    ...     {"type": "handoff", "task": "T", "from": "a", "to": "b"}))
    'none'
    """
    reasons = [d.reason for d in decision.detections if d.action == decision.action]
    if not reasons:
        reasons = [d.reason for d in decision.detections]
    if not reasons and decision.status in ("escalated", "paused"):
        reasons = [f"task {decision.task} is {decision.status} (waiting for a human)"]
    return "; ".join(reasons) if reasons else decision.action
