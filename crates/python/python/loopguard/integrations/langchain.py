"""loopguard for LangChain v1 agents (``pip install langchain``).

:class:`LoopGuardMiddleware` is an ``AgentMiddleware`` for
``langchain.agents.create_agent(..., middleware=[...])`` and so for the
LangGraph graphs built from such agents. Every tool call runs through it and
is observed with its answer (``tool_call``; a ``ToolMessage`` with status
``error``, or an exception, as ``error``); a tool that hands the work to
another agent (it returns a LangGraph ``Command`` whose ``goto`` names a
node, as the handoff tools of multi-agent graphs do) is a ``handoff`` from
this agent to that one. On ``inject_context`` for a call the model gets the
directive as that call's answer (a ``ToolMessage``) instead of the repeated
result. On ``escalate`` or ``abort`` the call's answer (or the refused
handoff's) is kept, the decision goes into the state (``loopguard_stop``:
``action``, ``reason``, ``decision``, a :class:`loopguard.Decision`) and
the agent jumps to its end before the next model call; the run's last
message is then an ``AIMessage`` (name ``loopguard``) saying why. A run
whose task is already stopped (behind the human gate, or aborted) ends the
same way before its first model call. A run that ends otherwise completes
its task.

Example::

    guard = loopguard.Guard(semantic=False)
    agent = create_agent(model, tools=[search],
                         middleware=[LoopGuardMiddleware(guard, agent="researcher")])
    state = agent.invoke({"messages": [HumanMessage("Find the flaky test")]})
    if state.get("loopguard_stop"):
        print(state["messages"][-1].content)         # loopguard: why the run was stopped

Each run is a task of its own (``langchain-<hex>``, kept in the state as
``loopguard_task`` and cleared when the run completes) unless ``task``
names one. A run given a ``loopguard_task`` in its input keeps it: in a
multi-agent graph, give the parent graph's state that key (or every
agent's middleware the same ``task``) so that all its agents feed one task.

What each model call spent (the ``AIMessage``'s ``usage_metadata``: input
and output tokens, with ``response_metadata["model_name"]``) goes on the
event of the first tool call that message asked for, as the event's
``usage``; a final answer's goes on the run's completion.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Dict, List, Optional, Union

from .. import Decision, Guard, stop_reason
from ._common import directive, json_value, new_task, require, usage, with_usage

require("langchain.agents", "langchain", "langchain")

from langchain.agents.middleware import (  # noqa: E402
    AgentMiddleware,
    AgentState,
    hook_config,
)
from langchain.agents.middleware.types import ToolCallRequest  # noqa: E402
from langchain_core.messages import AIMessage, ToolMessage  # noqa: E402
from langgraph.runtime import Runtime  # noqa: E402
from langgraph.types import Command  # noqa: E402
from typing_extensions import NotRequired  # noqa: E402

__all__ = ["LoopGuardMiddleware", "LoopGuardState"]

ToolAnswer = Union[ToolMessage, Command]


class LoopGuardState(AgentState):
    """The agent's state with loopguard's two keys."""

    loopguard_task: NotRequired[Optional[str]]
    """The loopguard task of this run."""
    loopguard_stop: NotRequired[Optional[Dict[str, Any]]]
    """Set when loopguard stopped the run: ``action``, ``reason`` and the
    ``decision`` (a :class:`loopguard.Decision`)."""


class LoopGuardMiddleware(AgentMiddleware[LoopGuardState, Any]):
    """Feeds a :class:`loopguard.Guard` an agent's tool calls and acts on them.

    ``agent``: the agent's name in the events (``agent`` by default);
    ``task``: one loopguard task for every run (default: one per run).

    >>> import loopguard
    >>> from loopguard.integrations.langchain import LoopGuardMiddleware
    >>> middleware = LoopGuardMiddleware(loopguard.Guard(semantic=False), agent="coder")
    >>> middleware.name
    'loopguard'
    """

    state_schema = LoopGuardState

    def __init__(self, guard: Guard, *, agent: str = "agent", task: Optional[str] = None) -> None:
        super().__init__()
        self.guard = guard
        self.agent = agent
        self.task = task

    @property
    def name(self) -> str:
        """The middleware's name in the graph."""
        return "loopguard"

    def before_agent(self, state: LoopGuardState, runtime: Runtime[Any]) -> Dict[str, Any]:
        """Starts the run's task (or keeps the one the input names); a task
        that is already stopped stops the run before its first step."""
        task = self.task or state.get("loopguard_task") or new_task("langchain")
        gate = self.guard.gate(task)
        return {"loopguard_task": task, "loopguard_stop": _stop(gate) if gate else None}

    @hook_config(can_jump_to=["end"])
    def before_model(
        self, state: LoopGuardState, runtime: Runtime[Any]
    ) -> Optional[Dict[str, Any]]:
        """Ends the run before the next model call once loopguard stopped it,
        with an AIMessage that says why."""
        stop = state.get("loopguard_stop")
        if not stop:
            return None
        said = AIMessage(content=f"loopguard: {stop['reason']}", name="loopguard")
        return {"jump_to": "end", "messages": [said]}

    def after_agent(self, state: LoopGuardState, runtime: Runtime[Any]) -> Optional[Dict[str, Any]]:
        """A run that ended without being stopped completes its task (when
        the guard has seen any event of it)."""
        task = state.get("loopguard_task")
        if not task or state.get("loopguard_stop"):
            return None
        if self.guard.status(task) is not None:
            self.guard.completed(task, usage=_final_answer_usage(state.get("messages") or []))
        return {"loopguard_task": None}

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolAnswer]
    ) -> ToolAnswer:
        """Runs the call, observes it with its answer, and acts on the decision."""
        try:
            answer = handler(request)
        except Exception as err:
            self.guard.observe(self._failed(request, err))
            raise
        event = self._event(request, answer)
        if event is None:
            return answer
        return self._act(request, answer, self.guard.observe(event))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolAnswer]],
    ) -> ToolAnswer:
        """:meth:`wrap_tool_call` for ``ainvoke``/``astream``."""
        try:
            answer = await handler(request)
        except Exception as err:
            await self.guard.aobserve(self._failed(request, err))
            raise
        event = self._event(request, answer)
        if event is None:
            return answer
        return self._act(request, answer, await self.guard.aobserve(event))

    def _task(self, request: ToolCallRequest) -> str:
        state = request.state if isinstance(request.state, dict) else {}
        return self.task or state.get("loopguard_task") or f"langchain-{self.agent}"

    def _failed(self, request: ToolCallRequest, err: Exception) -> Dict[str, Any]:
        """The ``tool_call`` of a call that raised."""
        return {**self._call(request), "error": f"{type(err).__name__}: {err}"}

    def _call(self, request: ToolCallRequest) -> Dict[str, Any]:
        """The ``tool_call`` of a call, without its answer (with the usage
        of the model call that asked for it, on its first call)."""
        return with_usage(self._bare_call(request), _call_usage(request))

    def _bare_call(self, request: ToolCallRequest) -> Dict[str, Any]:
        """The ``tool_call`` of a call: its task, agent, tool, arguments and id."""
        call = request.tool_call
        event = {
            "type": "tool_call",
            "task": self._task(request),
            "agent": self.agent,
            "tool": call["name"],
            "args": json_value(call.get("args")),
        }
        if call.get("id"):
            event["call_id"] = call["id"]
        return event

    def _event(self, request: ToolCallRequest, answer: ToolAnswer) -> Optional[Dict[str, Any]]:
        """The event of a call and its answer: a ``tool_call``, a ``handoff``
        for a Command that goes to another node, else none."""
        if isinstance(answer, ToolMessage):
            key = "error" if answer.status == "error" else "result"
            return {**self._call(request), key: answer.text}
        if not isinstance(answer.goto, str) or not answer.goto:
            return None
        event = {"type": "handoff", "task": self._task(request)}
        event.update({"from": self.agent, "to": answer.goto})
        args = request.tool_call.get("args") or {}
        text = [value for value in args.values() if isinstance(value, str)]
        if text:
            event["content"] = "\n".join(text)
        return with_usage(event, _call_usage(request))

    def _act(self, request: ToolCallRequest, answer: ToolAnswer, decision: Decision) -> ToolAnswer:
        """The answer the agent gets for this decision."""
        call_id, name = request.tool_call.get("id") or "", request.tool_call["name"]
        if decision.stopped:
            stop = _stop(decision)
            if isinstance(answer, Command):
                # The handoff does not happen: this agent ends instead.
                refused = f"loopguard refused the handoff to {answer.goto}: {stop['reason']}"
                answer = ToolMessage(content=refused, tool_call_id=call_id, name=name)
            return Command(update={"messages": [answer], "loopguard_stop": stop})
        text = directive(decision)
        if text is None or isinstance(answer, Command):
            return answer
        return ToolMessage(content=text, tool_call_id=call_id, name=name)


def _message_usage(message: AIMessage) -> Optional[Dict[str, Any]]:
    """What the model call that made ``message`` spent: its
    ``usage_metadata`` and ``response_metadata["model_name"]``."""
    spent = message.usage_metadata or {}
    model = (message.response_metadata or {}).get("model_name")
    return usage(spent.get("input_tokens"), spent.get("output_tokens"), model)


def _call_usage(request: ToolCallRequest) -> Optional[Dict[str, Any]]:
    """The usage of the model call that asked for this tool call, when it
    is the first call that message asked for (so a message's usage is
    counted once, however many calls it made)."""
    call_id = request.tool_call.get("id")
    if not call_id:
        return None
    state = request.state if isinstance(request.state, dict) else {}
    messages: List[Any] = state.get("messages") or []
    for message in reversed(messages):
        if not isinstance(message, AIMessage):
            continue
        ids = [call.get("id") for call in message.tool_calls]
        if call_id in ids:
            return _message_usage(message) if ids[0] == call_id else None
    return None


def _final_answer_usage(messages: List[Any]) -> Optional[Dict[str, Any]]:
    """The usage of the run's final answer: its last message, when that is
    the model's own answer with no tool call."""
    last = messages[-1] if messages else None
    if not isinstance(last, AIMessage) or last.tool_calls or last.name == "loopguard":
        return None
    return _message_usage(last)


def _stop(decision: Decision) -> Dict[str, Any]:
    """The state's ``loopguard_stop`` for a decision that stops the run."""
    return {"action": decision.action, "reason": stop_reason(decision), "decision": decision}
