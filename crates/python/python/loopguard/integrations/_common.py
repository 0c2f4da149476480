"""What the adapters share: task ids, framework imports, event values,
what model calls spent."""

from __future__ import annotations

import importlib
import json
import uuid
from types import ModuleType
from typing import Any, Dict, Optional, Set

from .. import Decision

def require(module: str, package: str, adapter: str) -> ModuleType:
    """Imports the framework ``module``, or raises an ImportError that names
    the pip ``package`` to install for ``adapter``."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"loopguard.integrations.{adapter} needs the `{package}` package "
            f"(pip install {package}): {err}",
            name=err.name,
        ) from err


def new_task(prefix: str) -> str:
    """A fresh task id for one run: ``prefix`` and 12 hex digits."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def arguments(text: Any) -> Any:
    """A tool call's arguments as JSON: a JSON text parsed, else as given."""
    if isinstance(text, str):
        try:
            return json.loads(text) if text.strip() else None
        except ValueError:
            return text
    return json_value(text)


def json_value(value: Any) -> Any:
    """``value`` when it is JSON already, else its text (a result object)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    try:
        json.dumps(value, allow_nan=False)
        return value
    except (TypeError, ValueError):
        return str(value)


def directive(decision: Decision) -> Optional[str]:
    """The text for the model when ``decision`` is ``inject_context``."""
    if decision.action != "inject_context":
        return None
    if decision.directive:
        return decision.directive
    for detection in decision.detections:
        if detection.directive:
            return detection.directive
    reasons = "; ".join(d.reason for d in decision.detections)
    return f"loopguard: you are repeating yourself ({reasons}). Change approach."


def tokens(count: Any) -> int:
    """A framework's token count as a whole number >= 0 (0 when absent or
    not a count)."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        return 0
    return count


def usage(input_tokens: Any, output_tokens: Any, model: Any = None) -> Optional[Dict[str, Any]]:
    """The trace contract's ``usage`` of one model call (trace format 1.2):
    its input and output tokens and, when known, its model's name (which
    ``[pricing.MODEL]`` prices). None when the call reported no tokens.

    >>> usage(1200, 80, "gpt-4o-mini")
    {'input_tokens': 1200, 'output_tokens': 80, 'model': 'gpt-4o-mini'}
    >>> usage(None, 0) is None
    True
    """
    spent: Dict[str, Any] = {
        "input_tokens": tokens(input_tokens),
        "output_tokens": tokens(output_tokens),
    }
    if spent["input_tokens"] == 0 and spent["output_tokens"] == 0:
        return None
    if isinstance(model, str) and model:
        spent["model"] = model
    return spent


class PendingUsage:
    """What model calls spent that no event has carried yet.

    An adapter adds each model call's usage as the framework reports it;
    the next event the adapter sends for the run takes it all (the tool
    call or handoff the model asked for, or the run's completion), so that
    every token is counted once. Calls of different models give their sum
    no model name (no single price applies to it).

    >>> pending = PendingUsage()
    >>> pending.add(usage(100, 10, "m"))
    >>> pending.add(usage(50, 5, "m"))
    >>> pending.take(), pending.take()
    ({'input_tokens': 150, 'output_tokens': 15, 'model': 'm'}, None)
    """

    def __init__(self) -> None:
        self._input = 0
        self._output = 0
        self._models: Set[Optional[str]] = set()

    def add(self, spent: Optional[Dict[str, Any]]) -> None:
        """Adds one model call's ``usage`` (None adds nothing)."""
        if spent is None:
            return
        self._input += spent["input_tokens"]
        self._output += spent["output_tokens"]
        self._models.add(spent.get("model"))

    def take(self) -> Optional[Dict[str, Any]]:
        """The ``usage`` of everything added since the last take (None when
        nothing was), and starts again from nothing."""
        models = self._models
        spent = usage(self._input, self._output, next(iter(models)) if len(models) == 1 else None)
        self.clear()
        return spent

    def clear(self) -> None:
        """Forgets what was added."""
        self._input = 0
        self._output = 0
        self._models = set()


def with_usage(event: Dict[str, Any], spent: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """``event`` with ``spent`` as its ``usage`` (unchanged when None)."""
    return event if spent is None else {**event, "usage": spent}
