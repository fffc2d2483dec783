"""A scripted LM and retriever for unit tests of control flow: chosen texts with chosen logprobs,
chosen documents.

Never used for anything a benchmark reports on; the real embedded LM is tested elsewhere.
"""

from __future__ import annotations

import contextlib
import io
import math

from flarebench.strategies.lm import LM, ChatRequest, GenerationRequest, Prompt, topk_entropy
from flarebench.strategies.records import LMCall, Passage
from flarebench.strategies.retriever import Retriever


class ScriptedLM(LM):
    """Replies with the next scripted item, cycling when the script runs out, and remembers every
    request. An item is a text, a (tokens, probabilities) pair, or a (tokens, probabilities,
    finish_reason) triple; finish_reason defaults to "stop" (the model ended its output). A fourth
    element, a dict, gives per-token data a trigger may ask for: ``top`` (per token, [text,
    probability] pairs, most likely first; served as logprobs, cut to the k asked for) and
    ``entropies`` (per token, in nats; without them an entropy request is answered from ``top`` as a
    server's backend answers it, the remaining mass one outcome)."""

    name = "scripted"
    supports_top_logprobs = True

    def __init__(self, script: list, supports_logprobs: bool = True):
        self.script = list(script)
        self.supports_logprobs = supports_logprobs
        self.requests: list[GenerationRequest] = []

    def _complete(self, request: GenerationRequest) -> LMCall:
        item = self.script[len(self.requests) % len(self.script)]
        self.requests.append(request)
        finish, extra = "stop", {}
        if isinstance(item, str):
            tokens, probs = [item], [1.0]
        elif len(item) == 4:  # (tokens, probabilities, finish_reason, per-token data)
            tokens, probs, finish, extra = item
        elif len(item) == 3:  # (tokens, probabilities, finish_reason)
            tokens, probs, finish = item
        else:
            tokens, probs = item
        tops = [[[t, math.log(p)] for t, p in alternatives] for alternatives in extra.get("top", [])] or None
        entropies = extra.get("entropies")
        if request.entropy and entropies is None and tops is not None:
            entropies = [topk_entropy([lp for _, lp in top]) for top in tops]
        return LMCall(
            purpose=request.purpose,
            prompt_tokens=len(request.prompt.text.split()),
            evaluated_tokens=len(request.prompt.dynamic.split()),
            completion_tokens=len(tokens),
            text="".join(tokens),
            finish_reason=finish,
            seconds=0.0,
            tokens=list(tokens),
            logprobs=[math.log(p) for p in probs] if request.logprobs else None,
            top_logprobs=[t[: request.top_logprobs] for t in tops] if request.top_logprobs and tops else None,
            entropies=list(entropies) if request.entropy and entropies is not None else None,
        )


class ScriptedRetriever(Retriever):
    """Returns the next scripted list of doc ids (cycling) as passages titled ``Doc <id>``, and
    remembers every query."""

    name = "scripted"

    def __init__(self, script: list[list[str]]):
        self.script = [list(ids) for ids in script]
        self.queries: list[str] = []

    def _search(self, query: str, k: int) -> list[Passage]:
        ids = self.script[len(self.queries) % len(self.script)][:k]
        self.queries.append(query)
        return [Passage(i, f"Doc {i}", f"Text of {i}.") for i in ids]


class ProbeAwareLM(ScriptedLM):
    """Answers each phantomwiki probe from a fixed table: right, wrong, or without a statement, with
    per-token probabilities that differ per probe (so FLARE's gate has something to measure), and
    for the triggers (or --record-topk) that ask, three alternatives per token: the chosen token,
    then two less likely ones (entropies bounded from them). A chat turn (tool_search) gets the same
    reply, with no tool call."""

    name = "scripted"
    supports_tools = True

    def __init__(self):
        super().__init__([""])
        from flarebench.probes.load import load_probe_set

        self.probes = load_probe_set("phantomwiki").probes

    def _complete(self, request):
        i, probe = next(((i, p) for i, p in enumerate(self.probes) if p.question in request.prompt.dynamic), (0, None))
        gold = ", ".join(probe.answers) if probe else "x"
        if i % 4 == 0:
            item = ([" So the answer is ", gold, "."], [0.95, 0.9, 0.99])
        elif i % 4 == 1:
            item = ([" So the answer is ", "Nobody", "."], [0.95, 0.3, 0.99])
        elif i % 4 == 2:
            item = ([" The answer might be ", gold, "."], [0.9, 0.6, 0.99])  # no statement
        else:
            item = ([" Hmm", " and"], [0.5, 0.5], "length")  # cut by the token cap
        tokens, probs = item[0], item[1]
        finish = item[2] if len(item) > 2 else "stop"
        # The runner-ups share what the chosen token leaves, each below it.
        rest = [max(min(p, 1 - p), 1e-6) for p in probs]
        top = [[[t, p], [" x", r / 2], [" y", r / 4]] for t, p, r in zip(tokens, probs, rest)]
        item = (tokens, probs, finish, {"top": top})
        self.script = [item]
        self.requests = []
        return super()._complete(request)

    def _chat(self, request: ChatRequest) -> LMCall:
        question = "\n".join(m.get("content") or "" for m in request.messages if m["role"] == "user")
        call = self._complete(GenerationRequest(Prompt("", question), request.max_tokens, purpose=request.purpose))
        call.tool_calls = [] if request.tools else None
        return call


def run_cli(*args: str) -> tuple[int, str, str]:
    """``flarebench ARGS`` in this process: (exit status, stdout, stderr)."""
    from flarebench.bench import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


class BagOfWordsEmbedder:
    """Unit vectors of hashed word counts: a deterministic stand-in for an embeddings endpoint in
    tests of the dense retriever's control flow (batching, resuming, fusion). ``fail_after`` batches,
    it raises, as an endpoint that goes away mid-run does."""

    name = "scripted:bow"

    def __init__(self, dim: int = 64, fail_after: int | None = None):
        self.dim, self.fail_after = dim, fail_after
        self.batches: list[list[str]] = []

    def embed(self, texts: list[str]):
        import zlib

        import numpy as np

        if self.fail_after is not None and len(self.batches) >= self.fail_after:
            raise ConnectionError("embedding endpoint went away")
        self.batches.append(list(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, zlib.crc32(word.strip(".,?").encode()) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)

    def describe(self) -> dict:
        return {"name": self.name, "dim": self.dim}
