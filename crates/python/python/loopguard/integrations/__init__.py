"""Adapters that put a :class:`loopguard.Guard` into agent frameworks.

Each adapter maps the framework's events to the trace contract (handoffs
and agent messages to ``handoff``, tool calls with their results to
``tool_call``, failed calls to a ``tool_call`` with ``error``) and acts on
each decision: ``inject_context`` puts the decision's directive where the
model reads it (as the repeated tool call's answer), ``escalate`` and
``abort`` stop the run with the reason.

- :mod:`loopguard.integrations.openai_agents`: ``LoopGuardHooks``, run
  hooks plus a tool input guardrail for the OpenAI Agents SDK
  (``pip install openai-agents``).
- :mod:`loopguard.integrations.langchain`: ``LoopGuardMiddleware`` for
  LangChain v1 agents and the LangGraph graphs built from them
  (``pip install langchain``).
- :mod:`loopguard.integrations.autogen`: ``LoopGuardTermination``, a
  termination condition for AutoGen AgentChat teams
  (``pip install autogen-agentchat``).

Each module imports its framework when it is imported itself, so this
package imports without any of them; importing an adapter whose framework
is missing raises an ImportError naming the package to install.

>>> import loopguard.integrations
>>> sorted(loopguard.integrations.ADAPTERS)
['autogen', 'langchain', 'openai_agents']
"""

from typing import Dict

ADAPTERS: Dict[str, str] = {
    "openai_agents": "openai-agents",
    "langchain": "langchain",
    "autogen": "autogen-agentchat",
}
"""Each adapter module's name and the pip package its framework comes from."""

__all__ = ["ADAPTERS"]
