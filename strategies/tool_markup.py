"""Tool calls written as text: the preamble that asks a model for them, and a lenient parser.

An in-process model has no tool API: it is told (by its template, or by :func:`tool_preamble`) how
to call a tool and writes the call as text. :func:`parse_tool_calls` reads the markups small open
models are trained on, in this order:

* Hermes / Qwen / SmolLM2-1.7B (APIGen): ``<tool_call>{"name": …, "arguments": {…}}</tool_call>``,
  the JSON an object or a list of them, the closing tag optional (generation stops at it);
* Llama 3: a bare ``{"name": …, "parameters": {…}}``;
* Gemma 3: ```` ```tool_code\\nsearch(query="…")\\n``` ````;
* llama.cpp's chatml-function-calling: ``functions.search:\\n{…}``.

A call is *attempted* when a markup is seen, and ``ok`` (parsed) when it names an offered tool with
every required argument a non-empty value; the others are malformed. Text with no markup is the
model's answer.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from flarebench.strategies.records import ToolCall

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
_TAGGED = re.compile(re.escape(CALL_OPEN) + r"(.*?)(?:" + re.escape(CALL_CLOSE) + r"|$)", re.DOTALL)
_BARE = re.compile(r'\{\s*"name"\s*:')
_TOOL_CODE = re.compile(r"```tool_code\s*(\w+)\((.*?)\)\s*(?:```|$)", re.DOTALL)
_FUNCTIONS = re.compile(r"functions\.(\w+):\s*(\{.*)", re.DOTALL)
_KWARG = re.compile(r'(\w+)\s*=\s*("(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\')')


def tool_preamble(tools: list[dict]) -> str:
    """What a template without tools gets in its system message: the tools as JSON and how to call
    one (Hermes wording, one example call)."""
    example = tools[0]["function"]
    arg = next(iter(example.get("parameters", {}).get("properties", {})), "query")
    return (
        "You may call the tools below. Their signatures are in <tools></tools> tags:\n"
        f"<tools>{json.dumps(tools, ensure_ascii=False)}</tools>\n"
        "To call a tool, reply with only its name and arguments as JSON in <tool_call></tool_call> tags, e.g.\n"
        f"{call_markup(example['name'], {arg: '...'})}\n"
        "The result comes back in <tool_response></tool_response> tags. When you need no tool, reply with the answer."
    )


def call_markup(name: str, arguments: Any) -> str:
    """One call as a model is asked to write it (``arguments`` a dict or its JSON text)."""
    if isinstance(arguments, str):
        arguments = _loads(arguments) if _loads(arguments) is not None else arguments
    return f"{CALL_OPEN}\n{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}\n{CALL_CLOSE}"


def parse_tool_calls(text: str, tools: list[dict], first: int = 0) -> tuple[str, list[ToolCall]]:
    """The text around the calls (stripped; ``text`` itself when it holds no markup) and the calls
    found in it (see the module), numbered from ``first`` (ids ``call_0``, ``call_1``, … over a
    conversation)."""
    found: list[tuple[str, Any, str]] = []  # (name, arguments, raw) per call
    rest = None  # the text around the markup, once some is seen
    if CALL_OPEN in text:
        for body in _TAGGED.findall(text):
            found += _json_calls(body)
        rest = _TAGGED.sub("", text)
    elif (m := _TOOL_CODE.search(text)) is not None:
        args = {k: _unquote(v) for k, v in _KWARG.findall(m.group(2))}
        found.append((m.group(1), args if args or not m.group(2).strip() else None, m.group(0)))
        rest = text[: m.start()] + text[m.end() :]
    elif (m := _FUNCTIONS.search(text)) is not None:
        found.append((m.group(1), _loads(m.group(2)), m.group(0)))
        rest = text[: m.start()]
    elif (m := _BARE.search(text)) is not None:
        found += _json_calls(text[m.start() :])
        rest = text[: m.start()]
    if rest is None:  # no markup: the answer, as written (its tokens join to it)
        return text, []
    calls = [
        ToolCall(f"call_{first + i}", name, args, raw, valid_call(name, args, tools))
        for i, (name, args, raw) in enumerate(found)
    ]
    return rest.strip(), calls


def _json_calls(body: str) -> list[tuple[str, Any, str]]:
    """The calls in the JSON of one markup: an object or a list of objects; one malformed call
    when it does not parse (a list ``[]`` is no call)."""
    raw = body.strip()
    data = _loads(raw)
    if data is None:
        return [("", None, raw)]
    items = data if isinstance(data, list) else [data]
    out = []
    for item in items:
        if not isinstance(item, dict):
            out.append(("", None, json.dumps(item)))
            continue
        args = item.get("arguments", item.get("parameters"))
        if isinstance(args, str):  # arguments double-encoded as a JSON string
            args = _loads(args)
        out.append((str(item.get("name", "")), args if isinstance(args, dict) else None, json.dumps(item)))
    return out


def _loads(text: str) -> Any:
    """The JSON value at the start of ``text`` (trailing text ignored), a Python literal where it is
    not JSON (single quotes), or None."""
    text = text.strip()
    try:
        return json.JSONDecoder().raw_decode(text)[0]
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _unquote(literal: str) -> str:
    try:
        return str(ast.literal_eval(literal))
    except (ValueError, SyntaxError):
        return literal[1:-1]


def valid_call(name: str, args: Any, tools: list[dict]) -> bool:
    """Whether a call names an offered tool and gives each of its required arguments a non-empty value."""
    spec = next((t["function"] for t in tools if t["function"]["name"] == name), None)
    if spec is None or not isinstance(args, dict):
        return False
    required = spec.get("parameters", {}).get("required", [])
    return all(str(args.get(k) or "").strip() for k in required)
