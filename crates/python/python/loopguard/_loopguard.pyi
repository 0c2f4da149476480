"""Type stubs of the native module ``loopguard._loopguard``."""

import os
from types import TracebackType
from typing import Any, Dict, List, Literal, Optional, Type, TypedDict, TypeVar, Union

__version__: str

Action = Literal[
    "none", "warn", "break_cycle", "inject_context", "pivot", "block", "escalate", "abort"
]
Severity = Literal["low", "medium", "high", "critical"]
Status = Literal["active", "completed", "escalated", "paused", "aborted_stuck"]

_G = TypeVar("_G", bound="Guard")

class _Tokens(TypedDict):
    input_tokens: int
    output_tokens: int

class SpendTotals(_Tokens, total=False):
    """Tokens and US dollars; ``cost_usd`` is absent when no event gave a
    cost and no ``[pricing]`` entry priced its model."""

    cost_usd: float

class Spend(SpendTotals):
    """A task's spend (``Decision.usage``): its totals, and ``in_loops``,
    the part spent on the events its loop detections name."""

    in_loops: SpendTotals

class LoopSpend(SpendTotals):
    """One loop and what its events spent."""

    kind: str
    evidence: List[int]

class BudgetCrossing(TypedDict):
    """What a ``budget`` detection names (``Detection.budget``)."""

    limit: str
    allowed: float
    spent: float
    usage: Spend
    costliest_loops: List[LoopSpend]

class EventUsage(TypedDict, total=False):
    """An event's ``usage``: what one step spent; each field optional."""

    input_tokens: Optional[int]
    output_tokens: Optional[int]
    cost_usd: Optional[float]
    model: Optional[str]

class LoopguardError(Exception):
    """The base of every loopguard exception."""

class EventError(LoopguardError):
    """An event that is not valid under the trace contract; the message names the field."""

class ConfigError(LoopguardError):
    """A config that cannot be read or is not valid."""

class StoreError(LoopguardError):
    """The store cannot be opened or read."""

class ModelError(LoopguardError):
    """The embedding model cannot be fetched, verified or loaded."""

class UnknownTaskError(LoopguardError):
    """``human()`` or ``completed()`` for a task the guard has seen no event of."""

class Detection:
    """One detector's finding on one event; equal, hashed and pickled as its dict."""

    def __init__(self, fields: Optional[Dict[str, Any]] = None, /, **more: Any) -> None: ...
    @property
    def kind(self) -> str: ...
    @property
    def detector(self) -> str: ...
    @property
    def severity(self) -> Severity: ...
    @property
    def action(self) -> Action: ...
    @property
    def reason(self) -> str: ...
    @property
    def evidence(self) -> List[int]: ...
    @property
    def evidence_ids(self) -> List[str]: ...
    @property
    def loop_count(self) -> Optional[int]: ...
    @property
    def count(self) -> Optional[int]: ...
    @property
    def directive(self) -> Optional[str]: ...
    @property
    def skip_agent(self) -> Optional[str]: ...
    @property
    def agents(self) -> List[str]: ...
    @property
    def budget(self) -> Optional[BudgetCrossing]:
        """On a ``budget`` detection: the limit crossed, the spend against it
        and the costliest loops; ``None`` on every other kind."""
        ...
    def to_dict(self) -> Dict[str, Any]: ...
    def _asdict(self) -> Dict[str, Any]: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

class Decision:
    """loopguard's answer to one event; equal, hashed and pickled as its dict."""

    def __init__(self, fields: Optional[Dict[str, Any]] = None, /, **more: Any) -> None: ...
    @property
    def action(self) -> Action: ...
    @property
    def stopped(self) -> bool:
        """Whether the run must stop: the action is ``escalate`` or ``abort``."""
        ...
    @property
    def loop_count(self) -> int: ...
    @property
    def status(self) -> Status: ...
    @property
    def directive(self) -> Optional[str]: ...
    @property
    def line(self) -> int: ...
    @property
    def task(self) -> str: ...
    @property
    def pivots(self) -> int: ...
    @property
    def id(self) -> Optional[str]: ...
    @property
    def detections(self) -> List[Detection]: ...
    @property
    def errors(self) -> List[str]: ...
    @property
    def notes(self) -> List[str]: ...
    @property
    def degraded(self) -> bool: ...
    @property
    def usage(self) -> Optional[Spend]:
        """The task's spend after this event, or None when none of its
        events carried ``usage``."""
        ...
    def to_dict(self) -> Dict[str, Any]: ...
    def _asdict(self) -> Dict[str, Any]: ...
    def to_json(self) -> str: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

class Guard:
    """The loop detector, in-process; thread-safe."""

    def __init__(
        self,
        config: Union[None, str, "os.PathLike[str]", Dict[str, Any]] = None,
        store: str = "memory",
        semantic: bool = True,
    ) -> None: ...
    def observe(self, event: Dict[str, Any]) -> Decision: ...
    def observe_json(self, line: str) -> Decision: ...
    def human(self, task: str, note: Optional[str] = None) -> Decision:
        """Lifts the human gate of ``task``; raises UnknownTaskError for an unknown task."""
        ...
    def completed(self, task: str, usage: Optional[EventUsage] = None) -> Decision:
        """Resets ``task`` as succeeded, with what its last step spent
        (``usage``); raises UnknownTaskError for an unknown task."""
        ...
    def status(self, task: str) -> Optional[Status]:
        """``task``'s status, or None when the guard has seen no event of it."""
        ...
    def gate(self, task: str) -> Optional[Decision]:
        """The escalate/abort decision holding ``task``, or None when it is not stopped."""
        ...
    def report(self) -> Dict[str, Any]: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def __enter__(self: _G) -> _G: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

def fetch_model(
    dir: Union[None, str, "os.PathLike[str]"] = None,
    config: Union[None, str, "os.PathLike[str]", Dict[str, Any]] = None,
) -> str:
    """Fetches (once) and verifies the pinned embedding model where a Guard
    looks for it; returns that directory. Raises ModelError or ConfigError."""
    ...

def run_plugin_worker(
    library: Union[str, "os.PathLike[str]"], memory_limit_mb: Optional[int] = None
) -> None:
    """Serves one plugin over stdin and stdout (the ``loopguard-plugin-worker``
    script's work; not for direct use)."""
    ...

def run_cli(argv: List[str]) -> int:
    """Runs the ``loopguard`` command line with ``argv`` (program name first)
    and returns its exit status (the ``loopguard`` console script's work)."""
    ...
