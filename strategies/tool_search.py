"""Agentic search with tool calling: the model is given one tool, ``search(query)``, and decides
itself when to search and with what.

Each turn the model either answers or calls ``search``; every call it makes is a retrieval (reason
``tool_call``) whose ``k`` documents go back to it as the tool's result, and the model is called
again. When ``max_searches`` tool turns are spent (or it replies with nothing) it gets one last
turn without the tool, and that reply is the answer. The backend serves the tools: an endpoint's
``tools`` API (``--lm openai:MODEL``) or, in-process, the model's own chat template and the
tool-call markup it writes (:mod:`~flarebench.strategies.tool_markup`). Calls that cannot be read
are kept in the trace (``LMCall.tool_calls``, ``ok`` false) and answered with an error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from flarebench.strategies.base import Strategy, finish, retrieve
from flarebench.strategies.capabilities import TOOLS
from flarebench.strategies.lm import LM, WARM_UP
from flarebench.strategies.prompts import ANSWER_MARK, format_docs
from flarebench.strategies.records import TOOL_CALL, LMCall, Passage, Step, ToolCall, Trace
from flarebench.strategies.registry import register
from flarebench.strategies.retriever import Retriever
from flarebench.strategies.tool_markup import tool_preamble

SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the documents; returns the most relevant ones for the query.",
        "parameters": {
            "type": "object",
            # maxLength bounds the query: llama_cpp.server's chatml-function-calling
            # generates arguments under a grammar that ignores max_tokens.
            "properties": {
                "query": {
                    "type": "string",
                    "maxLength": 200,
                    "description": "What to look up, e.g. 'mother of Bea Tull'.",
                }
            },
            "required": ["query"],
        },
    },
}

# A fictional worked example (the people of the shared exemplars), so no probe's answer leaks.
_EXAMPLE = (
    "Example. Question: Who is the mother of the friend of Ivo Lanark? You search 'friend of Ivo Lanark' and "
    "read that the friend of Ivo Lanark is Bea Tull; you search 'mother of Bea Tull' and read that the mother "
    "of Bea Tull is Rosa Tull. Then you answer: The friend of Ivo Lanark is Bea Tull. The mother of Bea Tull is "
    "Rosa Tull. So the answer is Rosa Tull."
)
SYSTEM = {
    "short": "Answer the question. Use the search tool to look up each fact you need, one query at a time. "
    f'When you know the answer, reason in short sentences and end with "{ANSWER_MARK}" followed by the '
    f"answer.\n\n{_EXAMPLE}",
    "long": "Answer the question in a few short sentences, one fact per sentence, giving each value exactly "
    "as the documents state it. Use the search tool to look up each fact you need, one query at a time.",
}
USER = "Question: {question}"
#: The tool's result for a call that cannot be run: unreadable, or over the search budget.
MALFORMED = 'Error: this call could not be read. Call search with {"query": "..."}.'
OVER_BUDGET = "Error: no searches left. Answer with what you have."


@register("tool_search")
@dataclass
class ToolSearch(Strategy):
    """The model searches through a ``search(query)`` tool until it answers. ``max_searches``
    caps the turns that may call the tool and the searches run (the answer then takes at most
    ``max_searches + 1`` calls); ``max_tokens`` caps each turn."""

    max_searches: int = 4

    def validate(self) -> None:
        super().validate()
        if self.max_searches < 0:
            raise ValueError(f"max_searches must be >= 0, got {self.max_searches}")

    def needs(self) -> frozenset[str]:
        return frozenset({TOOLS})

    def static_prompts(self) -> tuple[str, ...]:
        return (SYSTEM[self.answer_form],)

    def plain_prefixes(self) -> tuple[str, ...]:
        return ()  # every call is a chat turn: warm_up evaluates the rendered system message

    def request_shape(self) -> dict:
        return {
            "system": SYSTEM[self.answer_form],
            "user": USER,
            "tools": [SEARCH_TOOL],
            "tool_result": format_docs([Passage("<id>", "<title>", "<text>")]),
            "errors": [MALFORMED, OVER_BUDGET],
            # What an in-process model whose chat template has no tools is told instead.
            "preamble": tool_preamble([SEARCH_TOOL]),
        }

    def warm_up(self, lm: LM) -> LMCall:
        """One token after the system message with the tool: its rendering is the first turn's prefix."""
        return lm.chat(self._system(), [SEARCH_TOOL] if self.max_searches else [], 1, purpose=WARM_UP)

    def _system(self) -> list[dict]:
        return [{"role": "system", "content": SYSTEM[self.answer_form]}]

    def run(self, question: str, lm: LM, retriever: Retriever) -> Trace:
        messages = [*self._system(), {"role": "user", "content": USER.format(question=question)}]
        steps: list[Step] = []
        turns = searches = 0
        while True:
            tools = [SEARCH_TOOL] if turns < self.max_searches else []
            call = lm.chat(messages, tools, self.max_tokens, purpose="generate" if tools else "final")
            calls = call.tool_calls or []
            if not tools or (not calls and call.text.strip()):
                steps.append(Step(call.text, [call]))
                return finish(question, steps)
            turns += 1
            if not calls:  # an empty reply: it neither answers nor searches; ask for the answer
                steps.append(Step("", [call]))
                turns = self.max_searches
                continue
            results, retrievals = [], []
            for c in calls:
                if c.ok and searches < self.max_searches:
                    docs, record = retrieve(
                        retriever, " ".join(str(c.arguments["query"]).split()), self.k, TOOL_CALL, call_id=c.id
                    )
                    searches += 1
                    retrievals.append(record)
                    results.append(format_docs(docs))
                else:
                    results.append(MALFORMED if not c.ok else OVER_BUDGET)
            steps.append(Step("", [call], retrievals))
            messages.append({"role": "assistant", "content": call.text, "tool_calls": [_wire(c) for c in calls]})
            messages += [{"role": "tool", "tool_call_id": c.id, "content": r} for c, r in zip(calls, results)]


def _wire(call: ToolCall) -> dict:
    """A call as an assistant message carries it back (OpenAI shape): its arguments as JSON, or as
    the model wrote them when they are not an object; a call without a name under the tool's (an
    endpoint needs one)."""
    arguments = json.dumps(call.arguments, ensure_ascii=False) if call.arguments is not None else call.raw
    return {"id": call.id, "type": "function", "function": {"name": call.name or "search", "arguments": arguments}}
