"""tool_search (strategies/tool_search.py): the loop against a scripted chat LM, the tool-call
parser on real-looking markups, the in-process chat template, and (marked ``model``) the embedded
model and a real llama_cpp.server with chatml-function-calling."""

from __future__ import annotations

import json

import pytest

from flarebench.strategies.lm import LM, ChatRequest, GenerationRequest, WrappedLM
from flarebench.strategies.records import TOOL_CALL, LMCall, ToolCall, Trace
from flarebench.strategies.registry import parse_spec
from flarebench.strategies.tool_markup import parse_tool_calls
from flarebench.strategies.tool_search import MALFORMED, OVER_BUDGET, SEARCH_TOOL
from tests import servers
from tests.scripted import ScriptedRetriever

TOOLS = [SEARCH_TOOL]


def _call(query: str | None, i: int = 0) -> ToolCall:
    """A call of search (malformed when ``query`` is None)."""
    args = {"query": query} if query is not None else None
    return ToolCall(f"id{i}", "search", args, json.dumps(args) if args else "{bad", args is not None)


class ChatLM(LM):
    """Replies to chat turns from a script: each item a text (an answer) or a list of ToolCalls
    (served as calls only when tools were offered; else as an empty reply). Remembers every turn."""

    name = "chat-scripted"
    supports_tools = True

    def __init__(self, script: list):
        self.script = list(script)
        self.turns: list[ChatRequest] = []

    def _complete(self, request: GenerationRequest) -> LMCall:
        raise AssertionError("tool_search only chats")

    def _chat(self, request: ChatRequest) -> LMCall:
        item = self.script[min(len(self.turns), len(self.script) - 1)]
        self.turns.append(request)
        calls = item if isinstance(item, list) else []
        text = item if isinstance(item, str) else ""
        return LMCall(
            purpose=request.purpose,
            prompt_tokens=10 * len(request.messages),
            evaluated_tokens=10,
            completion_tokens=len(text.split()) + 5 * len(calls),
            text=text,
            finish_reason="stop",
            seconds=0.0,
            tokens=text.split(),
            tool_calls=list(calls) if request.tools else None,
        )


def _run(script: list, spec: str = "tool_search") -> tuple[Trace, ChatLM, ScriptedRetriever]:
    lm, retriever = ChatLM(script), ScriptedRetriever([["a", "b", "c"], ["d", "e", "f"]])
    return parse_spec(spec).run("Who is the mother of Bo?", lm, retriever), lm, retriever


def test_each_call_is_a_retrieval_whose_documents_go_back_as_the_tools_result():
    trace, lm, retriever = _run(
        [[_call("mother of Bo")], [_call("job of Ann", 1)], "Bo's mother is Ann. So the answer is Ann."]
    )
    assert retriever.queries == ["mother of Bo", "job of Ann"]
    assert [r.reason for r in trace.retrievals] == [TOOL_CALL, TOOL_CALL]
    assert trace.retrievals[0].detail == {"call_id": "id0"} and trace.retrievals[0].doc_ids == ["a", "b", "c"]
    last = lm.turns[-1].messages
    assert last[2] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "id0", "type": "function", "function": {"name": "search", "arguments": '{"query": "mother of Bo"}'}}
        ],
    }
    assert (
        last[3]["role"] == "tool" and last[3]["tool_call_id"] == "id0" and "[1] Doc a: Text of a." in last[3]["content"]
    )
    assert all(t.tools == TOOLS for t in lm.turns)  # it answered before the budget was spent
    assert (
        trace.answer == "Ann"
        and trace.stop_reason == "answer"
        and trace.output == "Bo's mother is Ann. So the answer is Ann."
    )
    assert len(trace.lm_calls) == 3 and trace.lm_calls[0].tool_calls[0].ok


def test_the_budget_ends_with_one_call_without_the_tool():
    trace, lm, retriever = _run([[_call("q")], [_call("r", 1)], "So the answer is Ann."], "tool_search:max_searches=2")
    assert [bool(t.tools) for t in lm.turns] == [True, True, False]
    assert len(retriever.queries) == 2 and [c.purpose for c in trace.lm_calls] == ["generate", "generate", "final"]
    assert trace.lm_calls[-1].tool_calls is None and trace.answer == "Ann"


def test_no_search_budget_answers_at_once():
    trace, lm, retriever = _run(["So the answer is Ann."], "tool_search:max_searches=0")
    assert len(lm.turns) == 1 and not lm.turns[0].tools and not retriever.queries and trace.answer == "Ann"


def test_malformed_calls_are_counted_answered_with_an_error_and_use_the_budget():
    trace, lm, retriever = _run(
        [[_call(None)], [_call(None, 1), _call("q", 2)], "So the answer is Ann."], "tool_search:max_searches=2"
    )
    assert retriever.queries == ["q"] and len(lm.turns) == 3
    results = [m for m in lm.turns[-1].messages if m["role"] == "tool"]
    assert [m["content"] for m in results[:2]] == [MALFORMED, MALFORMED]
    assert [m["tool_call_id"] for m in results] == ["id0", "id1", "id2"]
    calls = [c for call in trace.lm_calls for c in call.tool_calls or []]
    assert [c.ok for c in calls] == [False, False, True]
    assert lm.turns[1].messages[2]["tool_calls"][0]["function"]["arguments"] == "{bad"  # as the model wrote it


def test_calls_past_the_search_budget_are_not_run():
    trace, lm, retriever = _run(
        [[_call("a"), _call("b", 1), _call("c", 2)], "So the answer is Ann."], "tool_search:max_searches=2"
    )
    assert retriever.queries == ["a", "b"]
    assert [m["content"] for m in lm.turns[-1].messages if m["role"] == "tool"][2] == OVER_BUDGET


def test_an_empty_reply_asks_for_the_answer_without_the_tool():
    # llama_cpp.server's chatml-function-calling answers "" when the model chooses to reply.
    trace, lm, _ = _run(["", "So the answer is Ann."])
    assert [bool(t.tools) for t in lm.turns] == [True, False] and trace.answer == "Ann"


def test_the_trace_round_trips_with_its_tool_calls():
    trace, _, _ = _run([[_call("q"), _call(None, 1)], "So the answer is Ann."], "tool_search:max_searches=1")
    d = json.loads(json.dumps(trace.to_dict()))
    assert Trace.from_dict(d) == trace
    assert "tool_calls" not in d["steps"][-1]["lm_calls"][0]  # the final call was offered no tool


def test_chat_turns_are_served_from_the_cache_the_second_time(tmp_path):
    from flarebench.bench.cache import CachedLM, DiskCache

    cache = DiskCache(tmp_path)
    script = [[_call("q")], "So the answer is Ann."]
    first = parse_spec("tool_search").run("Who?", CachedLM(ChatLM(script), cache), ScriptedRetriever([["a"]]))
    inner = ChatLM(script)
    again = parse_spec("tool_search").run("Who?", CachedLM(inner, cache), ScriptedRetriever([["a"]]))
    assert not inner.turns and all(c.cached and c.evaluated_tokens == 0 for c in again.lm_calls)
    assert again.lm_calls[0].tool_calls == first.lm_calls[0].tool_calls and again.answer == first.answer == "Ann"
    cache.close()


def test_the_warm_up_renders_the_first_turns_prefix():
    lm = ChatLM(["x"])
    parse_spec("tool_search").warm_up(lm)
    (turn,) = lm.turns
    assert [m["role"] for m in turn.messages] == ["system"] and turn.tools == TOOLS and turn.max_tokens == 1


def test_the_runs_warm_up_evaluates_the_system_message_as_a_chat_turn_only():
    # Its system text begins no plain completion: warmed as one too, it would be a prefix no call uses.
    from flarebench.bench.runner import warm_up

    class Completes(ChatLM):
        def _complete(self, request: GenerationRequest) -> LMCall:  # single_time's static prefix
            self.completed.append(request.prompt.static)
            return LMCall(request.purpose, 20, 7, 1, " ", "length", 0.0)

    lm = Completes(["x"])
    lm.completed = []
    strategies = {name: parse_spec(name) for name in ("tool_search", "single_time")}
    done = warm_up(strategies, lm, ScriptedRetriever([["a"]]))
    assert (done["prefixes"], done["evaluated_tokens"]) == (2, 7 + 10) and len(lm.turns) == 1
    assert lm.completed == [strategies["single_time"].template.static]


def test_it_needs_tools_and_records_what_it_sends():
    s = parse_spec("tool_search")
    assert s.needs() == {"tools"} and s.params() == {
        "k": 3,
        "max_tokens": 128,
        "answer_form": "short",
        "max_searches": 4,
    }
    shape = s.request_shape()
    assert shape["tools"] == TOOLS and "So the answer is" in shape["system"] and "<tool_call>" in shape["preamble"]
    assert parse_spec("tool_search:answer_form=long").request_shape()["system"] != shape["system"]
    with pytest.raises(ValueError, match="max_searches"):
        parse_spec("tool_search:max_searches=-1")


# ------------------------------------------------------------------------------------------
# The tool-call parser
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>\n{"name": "search", "arguments": {"query": "mother of Bo"}}\n</tool_call>',  # Hermes, Qwen
        '<tool_call>[{"name": "search", "arguments": {"query": "mother of Bo"}}]</tool_call>',  # SmolLM2-1.7B
        '<tool_call>\n{"name": "search", "arguments": {"query": "mother of Bo"}}',  # cut at the stop
        '{"name": "search", "parameters": {"query": "mother of Bo"}}',  # Llama 3
        '```tool_code\nsearch(query="mother of Bo")\n```',  # Gemma 3
        'functions.search:\n{"query": "mother of Bo"}',  # chatml-function-calling
        "<tool_call>{'name': 'search', 'arguments': {'query': 'mother of Bo'}}</tool_call>",  # Python quotes
        '<tool_call>{"name": "search", "arguments": "{\\"query\\": \\"mother of Bo\\"}"}</tool_call>',  # double-encoded
    ],
)
def test_the_parser_reads_the_markups_small_models_write(text):
    rest, calls = parse_tool_calls(text, TOOLS, first=2)
    assert rest == "" and len(calls) == 1
    assert (calls[0].id, calls[0].name, calls[0].arguments, calls[0].ok) == (
        "call_2",
        "search",
        {"query": "mother of Bo"},
        True,
    )


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>\n{"name": "search", "arguments": {"query": "mother',  # cut mid-JSON
        '<tool_call>{"name": "lookup", "arguments": {"query": "x"}}</tool_call>',  # no such tool
        '<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>',  # no query
        '<tool_call>{"name": "search", "arguments": {"query": "  "}}</tool_call>',  # empty query
    ],
)
def test_unreadable_calls_are_attempted_but_malformed(text):
    _, calls = parse_tool_calls(text, TOOLS)
    assert len(calls) == 1 and not calls[0].ok


def test_text_without_markup_is_the_answer_and_several_calls_are_all_read():
    assert parse_tool_calls(" Bo's mother is Ann. So the answer is Ann.", TOOLS) == (
        " Bo's mother is Ann. So the answer is Ann.",
        [],
    )
    assert parse_tool_calls("<tool_call>[]</tool_call>", TOOLS) == ("", [])
    rest, calls = parse_tool_calls(
        'Let me look.\n<tool_call>\n{"name": "search", "arguments": {"query": "a"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "search", "arguments": {"query": "b"}}\n</tool_call>',
        TOOLS,
    )
    assert rest == "Let me look." and [c.arguments["query"] for c in calls] == ["a", "b"]


# ------------------------------------------------------------------------------------------
# The in-process chat template (rendering only: no model)
# ------------------------------------------------------------------------------------------

CHATML = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def test_a_template_without_tools_gets_the_preamble_the_markup_and_tool_responses():
    from flarebench.strategies.chat_template import ChatTemplate

    messages = [
        {"role": "system", "content": "Answer."},
        {"role": "user", "content": "Question: who?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "call_0", "type": "function", "function": {"name": "search", "arguments": '{"query": "x"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_0", "content": "Documents:\n[1] A: b\n"},
    ]
    prompt = ChatTemplate(CHATML, "<s>", "<|im_end|>").render(messages, TOOLS)
    assert (
        prompt.static.startswith("<|im_start|>system\nAnswer.\n\nYou may call the tools")
        and "<tools>[" in prompt.static
    )
    assert prompt.dynamic == (
        "<|im_start|>user\nQuestion: who?<|im_end|>\n"
        '<|im_start|>assistant\n<tool_call>\n{"name": "search", "arguments": {"query": "x"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\nDocuments:\n[1] A: b\n\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
    # The last turn without the tool: no preamble, the history kept.
    final = ChatTemplate(CHATML, "<s>", "<|im_end|>").render(messages, [])
    assert final.static == "<|im_start|>system\nAnswer.<|im_end|>\n" and final.dynamic == prompt.dynamic


def test_a_template_with_tools_renders_them_itself():
    from flarebench.strategies.chat_template import ChatTemplate

    template = "{% if tools %}TOOLS:{{ tools | tojson }}\n{% endif %}" + CHATML
    prompt = ChatTemplate(template, "<s>", "</s>").render([{"role": "user", "content": "hi"}], TOOLS)
    assert (
        prompt.static == ""
        and prompt.dynamic.startswith('TOOLS:[{"type": "function"')
        and "<tool_call>" not in prompt.dynamic
    )


# ------------------------------------------------------------------------------------------
# The real model: in-process, and behind llama_cpp.server's tools
# ------------------------------------------------------------------------------------------


def _counts(trace: Trace) -> dict:
    calls = [c for call in trace.lm_calls for c in call.tool_calls or []]
    return {"attempted": len(calls), "parsed": sum(c.ok for c in calls), "malformed": sum(not c.ok for c in calls)}


@pytest.mark.model
def test_the_embedded_model_runs_tool_search(lm, phantom, retriever):
    """Whatever SmolLM2-135M does with the tool (it was not trained to call tools), every turn is in
    the trace with its tokens and time, and the calls it attempted are counted."""
    strategy = parse_spec("tool_search")
    for probe in phantom.probes[:2]:
        trace = strategy.run(probe.question, lm, retriever)
        calls = trace.lm_calls
        assert 1 <= len(calls) <= strategy.max_searches + 1
        assert all(c.prompt_tokens > 0 and c.seconds > 0 for c in calls)
        assert calls[0].tool_calls is not None  # the first turn was offered the tool
        assert len(trace.retrievals) <= _counts(trace)["parsed"]
        print(probe.id, _counts(trace), repr(trace.output[:80]))


class Recording(WrappedLM):
    """Remembers every chat turn it forwards, with the reply."""

    def __init__(self, inner: LM):
        super().__init__(inner)
        self.turns: list[tuple[ChatRequest, LMCall]] = []

    def _complete(self, request):
        return self.forward(request)

    def _chat(self, request):
        call = super()._chat(request)
        self.turns.append((request, call))
        return call


@pytest.mark.model
def test_tool_search_through_a_llama_cpp_servers_tools(tmp_path, phantom, retriever):
    """llama_cpp.server with chatml-function-calling: the probe finds tools, the calls' ids go back
    with their results, and the loop ends within max_searches + 1 turns (answers are not judged:
    that handler drops tool messages from the prompt)."""
    from flarebench.strategies.openai_lm import OpenAILM

    with servers.llama_server(tmp_path / "server.log", "--chat_format", "chatml-function-calling") as url:
        served = OpenAILM("smollm2", base_url=url, max_retries=0, timeout=120)
        assert served.capabilities.tools and "tools" in served.offers()
        lm = Recording(served)
        strategy = parse_spec("tool_search:max_searches=2")
        trace = strategy.run(phantom.probes[0].question, lm, retriever)
        served.close()
    assert 1 <= len(lm.turns) <= 3 and trace.error is None
    for (_, call), (after, _) in zip(lm.turns, lm.turns[1:]):
        for c in call.tool_calls or []:
            sent = [m for m in after.messages if m["role"] == "assistant"][-1]
            assert c.id in [t["id"] for t in sent["tool_calls"]] and sent["content"] == ""
            assert any(m["role"] == "tool" and m["tool_call_id"] == c.id for m in after.messages)
    assert lm.turns[-1][0].tools == [] or len(lm.turns) < 3
    print(_counts(trace), [len(c.tool_calls or []) for _, c in lm.turns], repr(trace.output[:80]))


# ------------------------------------------------------------------------------------------
# The tool_calls scorer
# ------------------------------------------------------------------------------------------


def test_the_summary_counts_parsed_and_malformed_calls_and_leaves_other_strategies_empty(phantom):
    import math

    import pandas as pd

    from flarebench.bench.metrics import probe_row, summarize

    probes = phantom.probes[:2]
    rows = []
    for probe, script in zip(
        probes, ([[_call("q"), _call(None, 1)], "So the answer is Ann."], ["So the answer is Bo."])
    ):
        trace, _, _ = _run(script, "tool_search:max_searches=1")
        trace.probe_id, trace.strategy = probe.id, "tool_search"
        rows.append(probe_row(trace, probe))
        other = Trace(
            probe.question, "So the answer is Ann.", "Ann", "answer", probe_id=probe.id, strategy="no_retrieval"
        )
        rows.append(probe_row(other, probe))
    summary = summarize(pd.DataFrame(rows)).set_index("strategy")
    assert summary.loc["tool_search", "tool_calls_parsed_per_q"] == 0.5
    assert summary.loc["tool_search", "tool_calls_malformed_per_q"] == 0.5
    assert math.isnan(summary.loc["no_retrieval", "tool_calls_parsed_per_q"])
    notes = [n for n in summary.attrs["notes"] if n.startswith("tool calls of")]
    assert notes == [
        "tool calls of tool_search: 2 attempted, 1 parsed, 1 malformed over 2 answers; "
        "1 ended with a turn without the tool"
    ]
    # A run without a tool-offering strategy has no tool columns at all.
    plain = summarize(pd.DataFrame([r for r in rows if r["strategy"] == "no_retrieval"]))
    assert "tool_calls_parsed_per_q" not in plain.columns
