"""A GGUF model's own chat template, rendered in-process for chat turns with tools.

The template is the GGUF's ``tokenizer.chat_template``, rendered by llama-cpp-python's
``Jinja2ChatFormatter`` (what ``llama_cpp.server`` renders without ``--chat_format``). A template
that reads ``tools`` is given them and renders them itself. One that does not (SmolLM2's plain
ChatML) gets the Hermes-style preamble of :func:`~flarebench.strategies.tool_markup.tool_preamble`
in its system message instead, the model's earlier calls as the ``<tool_call>`` markup it was asked
to write, and each tool result as a user turn in ``<tool_response>`` tags (the format of SmolLM2's
function-calling sibling, SmolLM2-1.7B-Instruct).

The system message, rendered alone, is the prompt's static part when it is a text prefix of the
whole rendering (else the whole prompt is dynamic): the backend evaluates it once per run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from flarebench.strategies.lm import Prompt
from flarebench.strategies.tool_markup import call_markup, tool_preamble

#: The metadata key of a GGUF's chat template.
TEMPLATE_KEY = "tokenizer.chat_template"
#: A template that mentions ``tools`` renders the tool definitions itself.
_USES_TOOLS = re.compile(r"\btools\b")


@dataclass(frozen=True)
class ChatTemplate:
    """A chat template and the BOS and EOS texts it may write."""

    template: str
    bos: str
    eos: str

    @classmethod
    def of(cls, llm) -> ChatTemplate | None:
        """The chat template of a loaded ``llama_cpp.Llama``, or None when its GGUF has none."""
        template = llm.metadata.get(TEMPLATE_KEY)
        if not template:
            return None
        model = llm._model
        return cls(template, model.token_get_text(llm.token_bos()), model.token_get_text(llm.token_eos()))

    @property
    def renders_tools(self) -> bool:
        """Whether the template renders tool definitions itself (else the preamble carries them)."""
        return bool(_USES_TOOLS.search(self.template))

    def render(self, messages: list[dict], tools: list[dict]) -> Prompt:
        """The prompt for the model's next turn, its system message the static part."""
        if not self.renders_tools:
            messages = hermes_messages(messages, tools)
        messages = [{**m, "content": m.get("content") or ""} for m in messages]  # None breaks templates
        extra = {"tools": tools} if tools and self.renders_tools else {}
        full = Jinja2ChatFormatter(self.template, self.eos, self.bos)(messages=messages, **extra).prompt
        static = ""
        if messages and messages[0]["role"] == "system":
            head = Jinja2ChatFormatter(self.template, self.eos, self.bos, add_generation_prompt=False)
            static = head(messages=messages[:1], **extra).prompt
            static = static if full.startswith(static) and len(static) < len(full) else ""
        return Prompt(static, full[len(static) :])


def hermes_messages(messages: list[dict], tools: list[dict]) -> list[dict]:
    """``messages`` for a template without tools: the tool preamble added to the system message (a
    system message made for it when there is none), assistant calls written as ``<tool_call>``
    markup, tool results as user turns in ``<tool_response>`` tags."""
    out: list[dict] = []
    for m in messages:
        role, content = m["role"], m.get("content") or ""
        if role == "assistant" and m.get("tool_calls"):
            calls = "\n".join(call_markup(c["function"]["name"], c["function"]["arguments"]) for c in m["tool_calls"])
            out.append({"role": "assistant", "content": f"{content}\n{calls}".strip()})
        elif role == "tool":
            out.append({"role": "user", "content": f"<tool_response>\n{content}\n</tool_response>"})
        else:
            out.append({"role": role, "content": content})
    if tools:
        if not out or out[0]["role"] != "system":
            out.insert(0, {"role": "system", "content": ""})
        out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{tool_preamble(tools)}".strip()}
    return out
