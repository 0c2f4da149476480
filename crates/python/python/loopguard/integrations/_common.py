"""What the adapters share: task ids, framework imports, event values."""

from __future__ import annotations

import importlib
import json
import uuid
from types import ModuleType
from typing import Any, Optional

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
