"""loopguard.integrations.langchain on a real LangChain v1 agent
(``create_agent``) with a scripted chat model (no network): a looping agent
gets the directive as its tool's answer, then the graph jumps to its end
with the reason in the state; a normal run is untouched."""

import asyncio

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from pydantic import Field  # noqa: E402

import loopguard  # noqa: E402
from conftest import RecordingGuard, sent_usage  # noqa: E402
from loopguard.integrations.langchain import LoopGuardMiddleware  # noqa: E402


class ScriptedChatModel(BaseChatModel):
    """Answers each turn from a script: ``(tool, args)`` calls (or a list of
    them, asked for at once), then a final message; keeps the messages it
    was given each turn. ``spend`` is the (input, output) tokens each
    answer reports in its ``usage_metadata``, ``reported_model`` the
    ``model_name`` of its ``response_metadata``."""

    script: list
    answer: str = "Done."
    seen: list = Field(default_factory=list)
    spend: tuple = (0, 0)
    reported_model: str = ""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(list(messages))
        turn = len(self.seen) - 1
        spent = self._spent()
        if turn < len(self.script):
            message = AIMessage(content="", tool_calls=tool_calls(turn, self.script[turn]), **spent)
        else:
            message = AIMessage(content=self.answer, **spent)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _spent(self) -> dict:
        """The usage fields of each answer (none when ``spend`` is zero)."""
        if self.spend == (0, 0):
            return {}
        input_tokens, output_tokens = self.spend
        usage_metadata = {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
        }
        return {
            "usage_metadata": usage_metadata,
            "response_metadata": {"model_name": self.reported_model},
        }


def tool_calls(turn, step):
    """A turn's tool calls: one ``(tool, args)`` (id ``call_<turn>``) or a
    list of them (ids ``call_<turn>_<n>``)."""
    if isinstance(step, tuple):
        name, args = step
        return [{"name": name, "args": args, "id": f"call_{turn}"}]
    return [
        {"name": name, "args": args, "id": f"call_{turn}_{n}"}
        for n, (name, args) in enumerate(step)
    ]


ran = []


@tool
def search(query: str) -> str:
    """Searches the test index."""
    ran.append(("search", query))
    return f"No results for {query!r} in the test index."


@tool
def read_file(path: str) -> str:
    """Reads a file."""
    ran.append(("read_file", path))
    return f"{path}: def test_flaky(): assert random() > 0.5"


LOOP = [("search", {"query": "flaky test"})] * 12


def directive_of(guard, task):
    [entry] = [t for t in guard.report()["tasks"] if t["task"] == task]
    return [d["directive"] for d in entry["detections"]], entry


def check_loop_state(state, model, guard):
    stop = state["loopguard_stop"]
    assert stop["action"] == "escalate"
    decision = stop["decision"]
    assert isinstance(decision, loopguard.Decision) and decision.stopped
    assert decision.detections[0].kind == "tool_repeat"
    assert stop["reason"] == decision.detections[0].reason
    # Five calls: the 3rd and 4th were answered with the directive, the 5th
    # stopped the run before the model's 6th turn.
    assert len(model.seen) == 5
    directives, entry = directive_of(guard, state["loopguard_task"])
    assert entry["status"] == "escalated"
    assert len(directives) == 3 and "search" in directives[0]
    after_third, after_fourth = model.seen[3][-1], model.seen[4][-1]
    assert isinstance(after_third, ToolMessage) and after_third.content == directives[0]
    assert after_third.tool_call_id == "call_2"
    assert after_fourth.content == directives[1]
    # The 2nd call's answer was the tool's own.
    assert model.seen[2][-1].content == "No results for 'flaky test' in the test index."
    # The graph ended at the stop: the 5th call's answer, then loopguard's
    # own final AIMessage with the reason.
    answer, final = state["messages"][-2:]
    assert isinstance(answer, ToolMessage) and answer.tool_call_id == "call_4"
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert final.content == f"loopguard: {stop['reason']}" and final.name == "loopguard"


def test_a_looping_agent_is_nudged_then_stopped():
    guard = loopguard.Guard(semantic=False)
    model = ScriptedChatModel(script=LOOP)
    agent = create_agent(
        model,
        tools=[search, read_file],
        middleware=[LoopGuardMiddleware(guard, agent="researcher")],
    )
    state = agent.invoke({"messages": [HumanMessage("Why is the test flaky?")]})
    check_loop_state(state, model, guard)


def test_a_looping_agent_is_stopped_under_ainvoke():
    guard = loopguard.Guard(semantic=False)
    model = ScriptedChatModel(script=LOOP)
    agent = create_agent(model, tools=[search], middleware=[LoopGuardMiddleware(guard)])
    state = asyncio.run(agent.ainvoke({"messages": [HumanMessage("Why is the test flaky?")]}))
    check_loop_state(state, model, guard)


def test_a_normal_run_is_untouched():
    script = [("search", {"query": "flaky test"}), ("read_file", {"path": "tests/test_x.py"})]
    answer = "test_flaky depends on random(); seed it."
    question = {"messages": [HumanMessage("Why is the test flaky?")]}

    ran.clear()
    plain = create_agent(ScriptedChatModel(script=script, answer=answer), tools=[search, read_file])
    plain_state = plain.invoke(question)
    plain_ran = list(ran)

    ran.clear()
    guard = loopguard.Guard(semantic=False)
    middleware = [LoopGuardMiddleware(guard)]
    model = ScriptedChatModel(script=script, answer=answer)
    agent = create_agent(model, tools=[search, read_file], middleware=middleware)
    state = agent.invoke(question)

    assert state["messages"][-1].content == plain_state["messages"][-1].content == answer
    assert [m.content for m in state["messages"]] == [m.content for m in plain_state["messages"]]
    assert ran == plain_ran
    # The run completed its task (and cleared it from the state).
    assert state["loopguard_stop"] is None and state["loopguard_task"] is None
    [entry] = guard.report()["tasks"]
    assert entry["status"] == "completed" and entry["detections"] == []
    # The two calls and the run's completion.
    assert guard.report()["events"] == 3
    # Another run is another task.
    model = ScriptedChatModel(script=script, answer=answer)
    create_agent(model, tools=[search, read_file], middleware=middleware).invoke(question)
    assert len({t["task"] for t in guard.report()["tasks"]}) == 2


def test_a_failing_tool_is_observed_as_an_error():
    @tool
    def deploy(target: str) -> str:
        """Deploys."""
        raise RuntimeError("permission denied on /srv")

    guard = loopguard.Guard(semantic=False)
    model = ScriptedChatModel(script=[("deploy", {"target": "prod"})] * 8)
    agent = create_agent(
        model, tools=[deploy], middleware=[LoopGuardMiddleware(guard, task="deploy")]
    )
    with pytest.raises(RuntimeError, match="permission denied"):
        agent.invoke({"messages": [HumanMessage("Ship it")]})
    [entry] = guard.report()["tasks"]
    assert entry["task"] == "deploy"
    assert guard.report()["events"] == 1


def test_agents_handing_work_back_and_forth_in_a_graph_are_stopped():
    from typing import Any, Dict, Optional

    from langchain.tools import ToolRuntime
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.types import Command
    from typing_extensions import NotRequired

    def transfer(to):
        @tool(f"transfer_to_{to}")
        def handoff(note: str, runtime: ToolRuntime) -> Command:
            """Hands the work to another agent."""
            done = ToolMessage(f"Handed to {to}.", tool_call_id=runtime.tool_call_id)
            return Command(goto=to, graph=Command.PARENT, update={"messages": [done]})

        return handoff

    class Team(MessagesState):
        loopguard_task: NotRequired[Optional[str]]
        loopguard_stop: NotRequired[Optional[Dict[str, Any]]]

    guard = loopguard.Guard(semantic=False)
    models, builder = {}, StateGraph(Team)
    for name, other in [("coder", "reviewer"), ("reviewer", "coder")]:
        script = [(f"transfer_to_{other}", {"note": "please look again"})] * 20
        models[name] = ScriptedChatModel(script=script)
        middleware = LoopGuardMiddleware(guard, agent=name)
        builder.add_node(
            name, create_agent(models[name], tools=[transfer(other)], middleware=[middleware])
        )
    builder.add_edge(START, "coder")
    graph = builder.compile()
    state = graph.invoke(
        {"messages": [HumanMessage("Fix the bug")], "loopguard_task": "review-1"},
        {"recursion_limit": 60},
    )

    stop = state["loopguard_stop"]
    assert stop["action"] == "escalate"
    assert stop["decision"].detections[0].kind == "agent_pair"
    assert "refused the handoff" in state["messages"][-2].content
    assert state["messages"][-1].content == f"loopguard: {stop['reason']}"
    [entry] = guard.report()["tasks"]
    assert entry["task"] == "review-1" and entry["status"] == "escalated"
    # The 12th exchange is critical: 6 model turns each, no 7th for the coder.
    hops = stop["decision"].line
    assert hops == 12
    assert len(models["coder"].seen) + len(models["reviewer"].seen) == 12


def test_a_tool_error_answer_is_a_failure_and_repeats_are_stopped():
    from langchain_core.tools import ToolException

    @tool
    def migrate(db: str) -> str:
        """Migrates."""
        raise ToolException("relation users already exists")

    migrate.handle_tool_error = True

    guard = loopguard.Guard(semantic=False)
    model = ScriptedChatModel(script=[("migrate", {"db": "prod"})] * 8)
    agent = create_agent(model, tools=[migrate], middleware=[LoopGuardMiddleware(guard)])
    state = agent.invoke({"messages": [HumanMessage("Migrate")]})

    # The 4th identical error is the 3rd loop (ruling 14): the human gate.
    stop = state["loopguard_stop"]
    assert stop["action"] == "escalate"
    assert stop["decision"].detections[0].kind == "exact_failure"
    assert len(model.seen) == 4
    first, second = model.seen[1][-1], model.seen[2][-1]
    assert first.status == "error" and first.content == "relation users already exists"
    # The 3rd (the 2nd loop) was answered with loopguard's words instead.
    nudge = model.seen[3][-1].content
    assert nudge != "relation users already exists" and "same error message" in nudge
    assert second.content == "relation users already exists"


def test_a_run_whose_task_is_already_stopped_ends_before_its_first_step():
    guard = loopguard.Guard(semantic=False)
    first = ScriptedChatModel(script=LOOP)
    middleware = [LoopGuardMiddleware(guard, task="flaky")]
    state = create_agent(first, tools=[search], middleware=middleware).invoke(
        {"messages": [HumanMessage("Why is the test flaky?")]}
    )
    assert state["loopguard_stop"]["action"] == "escalate"
    events = guard.report()["events"]

    # The task is behind the human gate: the next run neither calls the
    # model nor runs a tool, and says why.
    ran.clear()
    again = ScriptedChatModel(script=LOOP)
    state = create_agent(again, tools=[search], middleware=middleware).invoke(
        {"messages": [HumanMessage("Try again")]}
    )
    assert again.seen == [] and ran == []
    assert guard.report()["events"] == events
    stop = state["loopguard_stop"]
    assert stop["action"] == "escalate" and stop["decision"] == guard.gate("flaky")
    assert "escalated" in stop["reason"]
    final = state["messages"][-1]
    assert isinstance(final, AIMessage) and final.content == f"loopguard: {stop['reason']}"

    # Once a human lifts the gate, the task runs again.
    guard.human("flaky")
    state = create_agent(
        ScriptedChatModel(script=[], answer="Seeded."), tools=[search], middleware=middleware
    ).invoke({"messages": [HumanMessage("And now?")]})
    assert state["loopguard_stop"] is None
    assert state["messages"][-1].content == "Seeded."


def test_a_run_without_tool_calls_completes_nothing():
    guard = loopguard.Guard(semantic=False)
    model = ScriptedChatModel(script=[], answer="Nothing to look up.")
    agent = create_agent(model, tools=[search], middleware=[LoopGuardMiddleware(guard)])
    state = agent.invoke({"messages": [HumanMessage("Hello")]})
    assert state["messages"][-1].content == "Nothing to look up."
    assert state["loopguard_stop"] is None and state["loopguard_task"] is None
    assert guard.report()["tasks"] == []


def test_a_checkpointer_keeps_the_stop_decision():
    from langgraph.checkpoint.memory import InMemorySaver

    guard = loopguard.Guard(semantic=False)
    agent = create_agent(
        ScriptedChatModel(script=LOOP),
        tools=[search],
        middleware=[LoopGuardMiddleware(guard)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t-1"}}
    state = agent.invoke({"messages": [HumanMessage("Why is the test flaky?")]}, config)
    decision = state["loopguard_stop"]["decision"]
    kept = agent.get_state(config).values["loopguard_stop"]["decision"]
    assert isinstance(kept, loopguard.Decision) and kept == decision


PRICES = {"pricing": {"gpt-4o-mini": {"input_per_mtok": 2.0, "output_per_mtok": 8.0}}}
SPENT = {"input_tokens": 1000, "output_tokens": 100, "model": "gpt-4o-mini"}


def spending_model(script, answer="Done."):
    """A scripted model whose every answer spent 1000 + 100 tokens of
    ``gpt-4o-mini``."""
    return ScriptedChatModel(
        script=script, answer=answer, spend=(1000, 100), reported_model="gpt-4o-mini"
    )


def test_each_model_call_s_usage_goes_on_its_tool_call_and_decisions_sum_it():
    guard = RecordingGuard(PRICES, semantic=False)
    script = [("search", {"query": "flaky test"}), ("read_file", {"path": "tests/test_x.py"})]
    model = spending_model(script, answer="Seed random().")
    agent = create_agent(model, tools=[search, read_file], middleware=[LoopGuardMiddleware(guard)])
    state = agent.invoke({"messages": [HumanMessage("Why is the test flaky?")]})
    assert state["messages"][-1].content == "Seed random()."

    # Each tool call carries the model call that asked for it; the
    # completion carries the final answer's.
    assert [e["type"] for e in guard.events] == ["tool_call", "tool_call", "completed"]
    assert sent_usage(guard) == [SPENT, SPENT, SPENT]
    spent = [(d.usage["input_tokens"], d.usage["output_tokens"]) for d in guard.decisions]
    assert spent == [(1000, 100), (2000, 200), (3000, 300)]
    assert guard.decisions[-1].usage["cost_usd"] == pytest.approx(3000 * 2e-6 + 300 * 8e-6)
    [task] = guard.report()["tasks"]
    assert task["usage"]["input_tokens"] == 3000


def test_calls_asked_for_at_once_carry_their_message_s_usage_once():
    guard = RecordingGuard(semantic=False)
    both = [("search", {"query": "flaky test"}), ("read_file", {"path": "tests/test_x.py"})]
    model = spending_model([both])
    agent = create_agent(model, tools=[search, read_file], middleware=[LoopGuardMiddleware(guard)])
    agent.invoke({"messages": [HumanMessage("Why is the test flaky?")]})
    calls = [e for e in guard.events if e["type"] == "tool_call"]
    assert sorted(calls, key=lambda e: e["call_id"])[0].get("usage") == SPENT
    assert [e.get("usage") for e in calls].count(None) == 1
    assert guard.decisions[-1].usage["input_tokens"] == 2000


def test_a_budget_stops_a_run_that_spends_too_much():
    guard = loopguard.Guard({"budget": {"max_tokens": 2500}}, semantic=False)
    queries = ["flaky test", "random seed", "test order", "xdist", "timeouts", "fixtures"]
    model = spending_model([("search", {"query": query}) for query in queries])
    agent = create_agent(model, tools=[search], middleware=[LoopGuardMiddleware(guard)])
    state = agent.invoke({"messages": [HumanMessage("Why is the test flaky?")]})

    # 1100 tokens a call: the 3rd takes the task past 2500; no call repeats
    # another, so the budget alone stops the run.
    stop = state["loopguard_stop"]
    decision = stop["decision"]
    assert stop["action"] == "escalate" and len(model.seen) == 3
    [detection] = decision.detections
    assert detection.kind == "budget"
    assert detection.budget["limit"] == "budget.max_tokens"
    assert (detection.budget["allowed"], detection.budget["spent"]) == (2500, 3300)
    assert decision.usage["input_tokens"] == 3000 and decision.usage["output_tokens"] == 300
    assert state["messages"][-1].content == f"loopguard: {detection.reason}"
