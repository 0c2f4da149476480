"""loopguard for AutoGen AgentChat teams (``pip install autogen-agentchat``).

:class:`LoopGuardTermination` is a termination condition: give it to a team
(alone or combined, ``LoopGuardTermination(guard) | MaxMessageTermination(30)``)
and it feeds the guard what the team says: each tool call with its result
(``ToolCallRequestEvent`` + ``ToolCallExecutionEvent`` -> ``tool_call``, an
error result as ``error``), each ``HandoffMessage`` (``handoff``), and each
agent's chat message as a handoff from that agent to the one who spoke
before it (the user's task is not an exchange between agents). On
``escalate`` or ``abort`` it stops the team with the reason as the
``StopMessage``; the team's ``stop_reason`` is ``loopguard: <reason>``.
A run whose task is already stopped (behind the human gate, or aborted) is
stopped the same way on its task message, before any agent speaks (a run
without a task message is stopped on its first agent's answer instead).

Example::

    guard = loopguard.Guard(semantic=False)
    team = RoundRobinGroupChat([assistant],
                               termination_condition=LoopGuardTermination(guard)
                               | MaxMessageTermination(30))
    result = await team.run(task="What is the weather in Paris?")
    print(result.stop_reason)           # "loopguard: You have called ..." on a loop

What each model call spent (a message's ``models_usage``:
``prompt_tokens`` and ``completion_tokens``) goes on the next event the
condition sends, as the event's ``usage``: a ``ToolCallRequestEvent``'s
on its first tool call, a chat message's on its own handoff (an agent's
first message, which is no exchange yet, on the next event), whatever is
left on the run's completion.

A team's run that ends another way completes its task (when the team resets
its termination condition); the next run is a new task unless ``task`` names
one. A run loopguard stopped keeps its task, escalated until
``guard.human(task)``.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from .. import Decision, Guard, stop_reason
from ._common import PendingUsage, arguments, new_task, require, usage, with_usage

require("autogen_agentchat", "autogen-agentchat", "autogen")

from autogen_agentchat.base import TerminatedException, TerminationCondition  # noqa: E402
from autogen_agentchat.messages import (  # noqa: E402
    BaseAgentEvent,
    BaseChatMessage,
    BaseTextChatMessage,
    HandoffMessage,
    StopMessage,
    ToolCallExecutionEvent,
    ToolCallRequestEvent,
)

__all__ = ["LoopGuardTermination"]


class LoopGuardTermination(TerminationCondition):
    """Stops an AgentChat team when loopguard says ``escalate`` or ``abort``.

    ``task``: one loopguard task for every run (default: one per run,
    ``autogen-<hex>``); ``source``: the StopMessage's source. ``decisions``
    holds the current run's decisions; ``last_stop`` the decision that last
    stopped a run (kept after the team resets the condition).

    >>> import loopguard
    >>> from loopguard.integrations.autogen import LoopGuardTermination
    >>> condition = LoopGuardTermination(loopguard.Guard(semantic=False), task="T-9")
    >>> condition.task, condition.terminated, condition.last_stop
    ('T-9', False, None)
    """

    def __init__(
        self, guard: Guard, task: Optional[str] = None, *, source: str = "loopguard"
    ) -> None:
        self.guard = guard
        self.source = source
        self._fixed_task = task
        self.task: str = task or new_task("autogen")
        self.decisions: List[Decision] = []
        self._stopped: Optional[Decision] = None
        self.last_stop: Optional[Decision] = None
        self._calls: Dict[str, Tuple[str, str]] = {}
        self._speaker: Optional[str] = None
        self._started = False
        self._usage = PendingUsage()

    @property
    def terminated(self) -> bool:
        """Whether loopguard stopped the team (until :meth:`reset`)."""
        return self._stopped is not None

    async def __call__(
        self, messages: Sequence[BaseAgentEvent | BaseChatMessage]
    ) -> Optional[StopMessage]:
        """Observes the new messages; a StopMessage with the reason on escalate/abort."""
        if self._stopped is not None:
            raise TerminatedException("loopguard has already stopped this run")
        if not self._started:
            # The run's first check (on its task message, before any agent
            # speaks): a task that is already stopped stops the run.
            self._started = True
            gate = self.guard.gate(self.task)
            if gate is not None:
                return self._stop(gate)
        for message in messages:
            for event in self._events(message):
                event = with_usage({**event, "task": self.task}, self._usage.take())
                decision = await self.guard.aobserve(event)
                self.decisions.append(decision)
                if decision.stopped:
                    return self._stop(decision)
        return None

    def _stop(self, decision: Decision) -> StopMessage:
        """Stops the run on ``decision``: the StopMessage with its reason."""
        self._stopped = self.last_stop = decision
        return StopMessage(content=f"loopguard: {stop_reason(decision)}", source=self.source)

    async def reset(self) -> None:
        """The run ended: completes its task unless loopguard stopped it."""
        if self._stopped is None and self.decisions:
            self.guard.completed(self.task, usage=self._usage.take())
            if self._fixed_task is None:
                self.task = new_task("autogen")
        self._stopped = None
        self.decisions = []
        self._calls.clear()
        self._speaker = None
        self._started = False
        self._usage.clear()

    def _events(self, message: BaseAgentEvent | BaseChatMessage) -> Iterator[Dict[str, Any]]:
        """The contract's events for one message (none for most); what the
        model call behind it spent waits for the next event."""
        self._usage.add(_message_usage(message))
        if isinstance(message, ToolCallRequestEvent):
            for call in message.content:
                self._calls[call.id] = (call.name, call.arguments)
        elif isinstance(message, ToolCallExecutionEvent):
            for result in message.content:
                name, args = self._calls.pop(result.call_id, (result.name, ""))
                event: Dict[str, Any] = {
                    "type": "tool_call",
                    "agent": message.source,
                    "tool": result.name or name,
                    "args": arguments(args),
                }
                if result.call_id:
                    event["call_id"] = result.call_id
                event["error" if result.is_error else "result"] = result.content
                yield event
        elif isinstance(message, HandoffMessage):
            yield {
                "type": "handoff",
                "from": message.source,
                "to": message.target,
                "content": message.content,
            }
            self._speaker = message.target
        elif isinstance(message, BaseTextChatMessage) and not isinstance(message, StopMessage):
            if message.source == "user":
                return
            if self._speaker is not None and self._speaker != message.source:
                yield {
                    "type": "handoff",
                    "from": message.source,
                    "to": self._speaker,
                    "content": message.content,
                }
            self._speaker = message.source


def _message_usage(message: BaseAgentEvent | BaseChatMessage) -> Optional[Dict[str, Any]]:
    """What the model call behind ``message`` spent: its ``models_usage``
    (AutoGen's messages name no model)."""
    spent = getattr(message, "models_usage", None)
    if spent is None:
        return None
    return usage(getattr(spent, "prompt_tokens", None), getattr(spent, "completion_tokens", None))
