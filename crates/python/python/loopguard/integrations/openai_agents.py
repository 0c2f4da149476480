"""loopguard for the OpenAI Agents SDK (``pip install openai-agents``).

:class:`LoopGuardHooks` is a ``RunHooks``: pass it to ``Runner.run(...,
hooks=hooks)`` and it feeds the guard every handoff (``handoff``) and every
local tool call with its result (``tool_call``; a call the SDK answered with
its tool-error message as ``error``). Its ``tool_output_guardrail`` goes on
the agent's function tools (``tool_output_guardrails=[...]``): it observes
each call with the output the tool returned, and when loopguard says
``inject_context`` it rejects that output (the SDK's ``reject_content``), so
the model gets the directive as the repeated call's answer. ``escalate`` and
``abort`` raise :class:`loopguard.LoopDetected` (as
:class:`AgentsLoopDetected`) out of ``Runner.run``; a run whose task is
already stopped (behind the human gate, or aborted) raises it before its
first model call. A run that ends with a final output completes its task.

What each model call spent (the ``ModelResponse``'s ``usage``: input and
output tokens, with the agent's model name) goes on the next event the
hooks send, as the event's ``usage``: the handoff or the first tool call
the model asked for, else the run's completion (a final answer).

The guardrail is an output guardrail, not an input one, because loopguard
judges a repeated call by what it returned (ruling 15 of the trace format):
before the call runs there is no result to judge, and after it the
decision applies to the very call that brought nothing new.

Example::

    guard = loopguard.Guard(semantic=False)
    hooks = LoopGuardHooks(guard)                     # task: derived per run
    weather = function_tool(lookup_weather,
                            tool_output_guardrails=[hooks.tool_output_guardrail])
    agent = Agent(name="Weather agent", tools=[weather], model=...)
    try:
        result = await Runner.run(agent, "Weather in Paris?", hooks=hooks)
    except loopguard.LoopDetected as stop:
        print(stop.decision.action, stop)             # escalate, the reason

One hooks object serves one run at a time: give concurrent runs a
``LoopGuardHooks`` (and tools) each. After ``LoopDetected`` the task stays
behind the human gate (every later run of it stops before its first step)
until ``guard.human(hooks.task)``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from .. import Decision, Guard, LoopDetected
from ._common import (
    PendingUsage,
    arguments,
    directive,
    json_value,
    new_task,
    require,
    usage,
    with_usage,
)

require("agents", "openai-agents", "openai_agents")

from agents import (  # noqa: E402
    Agent,
    RunContextWrapper,
    RunHooks,
    Tool,
    ToolGuardrailFunctionOutput,
    ToolOutputGuardrail,
    ToolOutputGuardrailData,
)
from agents.exceptions import AgentsException  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.tool import default_tool_error_function  # noqa: E402

__all__ = ["AgentsLoopDetected", "LoopGuardHooks"]

# The text the SDK gives the model when a function tool raised (the default
# ``failure_error_function``): such a call failed.
_TOOL_ERROR = default_tool_error_function(RunContextWrapper(context=None), Exception())


class AgentsLoopDetected(LoopDetected, AgentsException):
    """:class:`loopguard.LoopDetected` as the SDK's own kind of exception, so
    ``Runner.run`` raises it as it is (the SDK wraps other exceptions from a
    tool's guardrails and hooks in a ``UserError``). Catch it as
    ``loopguard.LoopDetected``."""


def check(decision: Decision) -> Decision:
    """Raises :class:`AgentsLoopDetected` when ``decision`` stops the run."""
    if decision.stopped:
        raise AgentsLoopDetected(decision)
    return decision


class LoopGuardHooks(RunHooks[Any]):
    """Run hooks and a tool output guardrail that feed a :class:`loopguard.Guard`.

    ``task``: the loopguard task of every run these hooks watch; by default
    each run gets its own (``openai-agents-<hex>``, renewed when a run
    completes). ``decisions`` holds the current run's decisions. A tool
    without ``tool_output_guardrail`` is still observed (by
    ``on_tool_end``) and can stop the run, but its answers are not replaced.
    Each model call's usage (``on_llm_end``) rides on the next event the
    hooks send, so every decision reports the task's spend
    (:attr:`loopguard.Decision.usage`).

    >>> import loopguard
    >>> from loopguard.integrations.openai_agents import LoopGuardHooks
    >>> hooks = LoopGuardHooks(loopguard.Guard(semantic=False), task="T-7")
    >>> hooks.task, hooks.tool_output_guardrail.get_name()
    ('T-7', 'loopguard')
    """

    def __init__(self, guard: Guard, task: Optional[str] = None) -> None:
        self.guard = guard
        self._fixed_task = task
        self.task: str = task or new_task("openai-agents")
        self.decisions: List[Decision] = []
        self._usage = PendingUsage()
        self.tool_output_guardrail: ToolOutputGuardrail[Any] = ToolOutputGuardrail(
            guardrail_function=self._check_output, name="loopguard"
        )

    async def _observe(self, event: Dict[str, Any]) -> Decision:
        """Observes ``event`` in the run's task, with the usage no event has
        carried yet."""
        event = with_usage({**event, "task": self.task}, self._usage.take())
        decision = await self.guard.aobserve(event)
        self.decisions.append(decision)
        return decision

    async def on_agent_start(self, context: Any, agent: Agent[Any]) -> None:
        """An agent starts its turn: a task that is already stopped (behind
        the human gate, or aborted) raises LoopDetected before the agent's
        first model call, and so before any of its tools runs."""
        gate = self.guard.gate(self.task)
        if gate is not None:
            raise AgentsLoopDetected(gate)

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        """A model call returned: what it spent waits for the next event
        (the handoff or tool call it asked for, or the run's completion)."""
        spent = getattr(response, "usage", None)
        self._usage.add(
            usage(
                getattr(spent, "input_tokens", None),
                getattr(spent, "output_tokens", None),
                _model_name(agent),
            )
        )

    async def on_handoff(
        self, context: RunContextWrapper[Any], from_agent: Agent[Any], to_agent: Agent[Any]
    ) -> None:
        """Observes the handoff; raises LoopDetected on escalate/abort."""
        event = {"type": "handoff", "from": from_agent.name, "to": to_agent.name}
        check(await self._observe(event))

    async def on_tool_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool, result: object
    ) -> None:
        """Observes a call of a tool without the guardrail (the guardrail
        observed the others); raises LoopDetected on escalate/abort."""
        if self.tool_output_guardrail in (getattr(tool, "tool_output_guardrails", None) or []):
            return
        check(await self._observe(_event(context, agent, tool, result)))

    async def on_agent_end(self, context: Any, agent: Agent[Any], output: Any) -> None:
        """The run ended with a final output: its task is completed (when
        the run fed it any event), with what its last model calls spent."""
        spent = self._usage.take()
        if self.decisions:
            self.guard.completed(self.task, usage=spent)
        self.decisions = []
        if self._fixed_task is None:
            self.task = new_task("openai-agents")

    async def _check_output(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        """The guardrail: observes the call with its output; on inject_context
        the model gets the directive instead of the output."""
        decision = check(await self._observe(_event(data.context, data.agent, None, data.output)))
        text = directive(decision)
        if text is None:
            return ToolGuardrailFunctionOutput.allow(output_info=decision.to_dict())
        return ToolGuardrailFunctionOutput.reject_content(text, output_info=decision.to_dict())


def _model_name(agent: Agent[Any]) -> Optional[str]:
    """The name of the agent's model: its ``model`` setting when that is a
    name, else the ``model`` attribute of its Model object (as the SDK's
    OpenAI models have); None when neither says (the run's default)."""
    model = agent.model
    name = model if isinstance(model, str) else getattr(model, "model", None)
    return name if isinstance(name, str) and name else None


def _event(context: Any, agent: Agent[Any], tool: Optional[Tool], result: object) -> Dict[str, Any]:
    """The ``tool_call`` event of a call, from its ``ToolContext`` and result."""
    name = getattr(context, "tool_name", None) or getattr(tool, "name", "tool")
    event: Dict[str, Any] = {"type": "tool_call", "agent": agent.name, "tool": name}
    event["args"] = arguments(getattr(context, "tool_arguments", None) or "")
    call_id = getattr(context, "tool_call_id", None)
    if call_id:
        event["call_id"] = call_id
    if result == _TOOL_ERROR:
        event["error"] = result
    else:
        event["result"] = json_value(result)
    return event
