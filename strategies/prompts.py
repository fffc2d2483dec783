"""Few-shot prompts, laid out so the part that never changes comes first.

Layout (docs/design.md, Determinism): instruction and exemplars (static), then the documents, then the
question, then the answer so far. Two answer forms, chosen by the probe set: ``short`` (chain of
thought ending "So the answer is X.", which :func:`extract_answer` reads back) and ``long`` (a few
sentences, one fact each, with no final-answer statement; scored by its required facts).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from flarebench.strategies.lm import Prompt
from flarebench.strategies.records import Passage
from flarebench.strategies.sentences import first_sentence


@dataclass(frozen=True)
class Exemplar:
    """One worked example: supporting documents, a question and a chain-of-thought answer."""

    docs: tuple[tuple[str, str], ...]  # (title, text)
    question: str
    answer: str


# Fictional people, so no exemplar leaks an answer from a shipped probe set.
EXEMPLARS: tuple[Exemplar, ...] = (
    Exemplar(
        docs=(
            ("Ivo Lanark", "The friend of Ivo Lanark is Bea Tull. The occupation of Ivo Lanark is baker."),
            ("Bea Tull", "The mother of Bea Tull is Rosa Tull. The hobby of Bea Tull is chess."),
        ),
        question="Who is the mother of the friend of Ivo Lanark?",
        answer="The friend of Ivo Lanark is Bea Tull. The mother of Bea Tull is Rosa Tull. So the answer is Rosa Tull.",
    ),
    Exemplar(
        docs=(
            ("Nell Oster", "The father of Nell Oster is Tam Oster. The date of birth of Nell Oster is 0921-03-02."),
            ("Tam Oster", "The hobby of Tam Oster is fishing. The occupation of Tam Oster is pilot."),
        ),
        question="What is the hobby of the father of Nell Oster?",
        answer="The father of Nell Oster is Tam Oster. The hobby of Tam Oster is fishing. So the answer is fishing.",
    ),
    Exemplar(
        docs=(("Edda Voss", "The sons of Edda Voss are Kai Voss, Lin Voss. The occupation of Edda Voss is surgeon."),),
        question="How many sons does Edda Voss have?",
        answer="The sons of Edda Voss are Kai Voss, Lin Voss. So the answer is 2.",
    ),
    Exemplar(
        docs=(
            ("Ruth Kell", "The friends of Ruth Kell are Ada Moss, Bo Fink. The hobby of Ruth Kell is rowing."),
            ("Ada Moss", "The occupation of Ada Moss is nurse."),
            ("Bo Fink", "The occupation of Bo Fink is actor."),
        ),
        question="What is the occupation of the friend of Ruth Kell?",
        answer="The friends of Ruth Kell are Ada Moss, Bo Fink. The occupation of Ada Moss is nurse. "
        "The occupation of Bo Fink is actor. So the answer is nurse, actor.",
    ),
)

INSTRUCTION = (
    "Answer the question using the documents. Reason step by step in short sentences, "
    'then end with "So the answer is" followed by the answer.\n\n'
)
CLOSED_BOOK_INSTRUCTION = (
    "Answer the question. Reason step by step in short sentences, "
    'then end with "So the answer is" followed by the answer.\n\n'
)

# Long answers: each exemplar unfolds, a later sentence needing a fact that an earlier one found
# (the mother's name, then her facts; the manifest's tag, then the image's base). Fictional, as above.
LONG_EXEMPLARS: tuple[Exemplar, ...] = (
    Exemplar(
        docs=(
            ("Ivo Lanark", "The mother of Ivo Lanark is Mara Lanark. The occupation of Ivo Lanark is baker."),
            (
                "Mara Lanark",
                "The occupation of Mara Lanark is surgeon. The hobby of Mara Lanark is chess. "
                "The date of birth of Mara Lanark is 0890-05-14.",
            ),
        ),
        question="Describe the family of Ivo Lanark: name his mother, her occupation and her hobby.",
        answer="The mother of Ivo Lanark is Mara Lanark. The occupation of Mara Lanark is surgeon. "
        "The hobby of Mara Lanark is chess.",
    ),
    Exemplar(
        docs=(
            (
                "deploy-quillpay",
                "Service: quillpay. Environment: production. image: registry.example/quillpay:2.7.1. "
                "Staging runs quillpay:2.8.0-rc2.",
            ),
            ("image-quillpay-2.7.1", "quillpay:2.7.1 is built on the base image corvid-base 3.4."),
            (
                "rb-quillpay-rollout",
                "After a quillpay rollout, watch the error rate for 15 minutes; roll back if it exceeds 2%.",
            ),
        ),
        question="Walk me through deploying quillpay to production: which image, the base image it is built on, "
        "and what to check after the rollout.",
        answer="Production runs the image quillpay:2.7.1, as its deploy manifest pins. "
        "That image is built on the base image corvid-base 3.4. "
        "After the rollout, watch the error rate for 15 minutes and roll back if it exceeds 2%.",
    ),
    Exemplar(
        docs=(
            (
                "pm-inc-4410",
                "Incident 4410: the billing cache filled its disk. Incident commander: Lene Brask. "
                "Cause: a config change disabled log rotation. Follow-up owner: Pim Hale.",
            ),
            ("team-storage", "Pim Hale leads the storage team, reachable in #storage-oncall."),
        ),
        question="Write a short summary of incident 4410: who commanded it, its cause, and who owns the follow-up.",
        answer="Incident 4410 was commanded by Lene Brask. The billing cache filled its disk because a config change "
        "disabled log rotation. The follow-up is owned by Pim Hale, who leads the storage team.",
    ),
)

LONG_INSTRUCTION = (
    "Answer the question using the documents in a few short sentences, one fact per sentence, "
    "giving each value exactly as the documents state it.\n\n"
)
LONG_CLOSED_BOOK_INSTRUCTION = "Answer the question in a few short sentences, one fact per sentence.\n\n"

#: The answer forms a probe set can ask for (a strategy's ``answer_form``).
ANSWER_FORMS = ("short", "long")
ANSWER_MARK = "So the answer is"
#: Generation of one answer stops at a blank line or where the model starts a new example.
STOP = ("\n\n", "\nQuestion:", "\nDocuments:")


def format_docs(docs: list[Passage] | tuple[tuple[str, str], ...], start: int = 1) -> str:
    """The documents block, one numbered line per document, numbered from ``start``."""
    lines = []
    for i, d in enumerate(docs, start):
        title, text = (d.title, d.text) if hasattr(d, "title") else d
        lines.append(f"[{i}] {title}: {' '.join(text.split())}")
    return "Documents:\n" + "\n".join(lines) + "\n"


@dataclass(frozen=True)
class PromptTemplate:
    """Builds prompts for one run: with documents (open book) or without (closed book)."""

    open_book: bool = True
    exemplars: tuple[Exemplar, ...] = EXEMPLARS
    #: Replaces the default instruction (e.g. FLARE instruct's, which teaches search calls).
    instruction: str | None = None
    #: The line after the question that the answer continues (self_ask's "Are follow up questions
    #: needed here:", which the model answers before its follow-up questions).
    answer_label: str = "Answer:"

    @functools.cached_property
    def static(self) -> str:
        """Instruction and exemplars: identical for every call of a run."""
        parts = [self.instruction or (INSTRUCTION if self.open_book else CLOSED_BOOK_INSTRUCTION)]
        for ex in self.exemplars:
            if self.open_book:
                parts.append(format_docs(ex.docs))
            parts.append(f"Question: {ex.question}\n{self.answer_label} {ex.answer}\n\n")
        return "".join(parts)

    def sample(self, late_docs: bool = False) -> str:
        """The whole prompt rendered with placeholders: what identifies the template (static part,
        document block, question and answer layout) in a run's request fingerprint; with
        ``late_docs``, the layout with a second block after the question."""
        late = [Passage("<late id>", "<late title>", "<late text>")] if late_docs else []
        return self.build("<question>", [Passage("<id>", "<title>", "<text>")], "<answer so far>", late).text

    def build(
        self, question: str, docs: list[Passage] = (), answer_so_far: str = "", late_docs: list[Passage] = ()
    ) -> Prompt:
        """The prompt for ``question`` with ``docs`` in context and the answer generated so far.

        The prompt ends at the answer label ("Answer:") with no space, so the model writes the
        space-led tokens it saw in the exemplars; ``answer_so_far`` is the raw text generated so far
        (space included). ``late_docs`` (open book only) form a second block after the question,
        right before the answer, numbered on from ``docs``: changing them leaves the prompt up to the
        question as it was, so a backend reuses its state (flare_direct's ``placement=near_pause``)."""
        head = format_docs(docs) if self.open_book else ""
        late = format_docs(late_docs, len(docs) + 1) if self.open_book and late_docs else ""
        return Prompt(self.static, f"{head}Question: {question}\n{late}{self.answer_label}{answer_so_far}")


#: The default templates: open book (with documents) and closed book, for short and long answers.
OPEN_BOOK = PromptTemplate(open_book=True)
CLOSED_BOOK = PromptTemplate(open_book=False)
LONG_OPEN_BOOK = PromptTemplate(open_book=True, exemplars=LONG_EXEMPLARS, instruction=LONG_INSTRUCTION)
LONG_CLOSED_BOOK = PromptTemplate(open_book=False, exemplars=LONG_EXEMPLARS, instruction=LONG_CLOSED_BOOK_INSTRUCTION)
_TEMPLATES = {
    ("short", True): OPEN_BOOK,
    ("short", False): CLOSED_BOOK,
    ("long", True): LONG_OPEN_BOOK,
    ("long", False): LONG_CLOSED_BOOK,
}


def template(answer_form: str = "short", open_book: bool = True) -> PromptTemplate:
    """The default template for an answer form (``short`` or ``long``), with or without documents."""
    return _TEMPLATES[answer_form, open_book]


_ANSWER_RE = re.compile(r"answer is:?\s*(.+)", re.IGNORECASE)
_STATEMENT_RE = re.compile(r"answer is", re.IGNORECASE)


def extract_answer(output: str) -> str | None:
    """The final answer stated in ``output`` ("... So the answer is X."), or None if there is none:
    the text after the last "answer is" (a colon after it allowed, "So" not needed; the text may
    begin on the next line), up to the end of its sentence. The last: an answer that corrects itself
    ("So the answer is A. ... So the answer is B.") ends with the one it gives."""
    # Statements can sit on one line, so the last is found from its start ("answer is"), not by
    # matching statements in turn (the first one's text would take in the rest of its line).
    starts = [s.start() for s in _STATEMENT_RE.finditer(output)]
    m = next((m for at in reversed(starts) if (m := _ANSWER_RE.match(output, at))), None)
    if m is None:
        return None
    # Only the statement's own sentence: an output may run on past it ("X. The answer is X"). It
    # is split with the statement's opening before it, as the text reads: alone, "6. Each broker
    # ..." starts like a numbered list and would not end at "6.".
    opening = " ".join(output[m.start() : m.start(1)].split()) + " "
    sentence = first_sentence(opening + m.group(1).split("\n")[0])
    answer = re.sub(r"[.\s]+$", "", sentence[len(opening) :].strip())
    return answer or None


# A stated answer that says there is none ("The answer is not in the documents"): an abstention.
_ABSTENTION_RE = re.compile(
    r"\b(?:not (?:(?:mentioned|given|stated|found|provided|listed) )?(?:in|by) the "
    r"(?:documents?|passages?|text|context)"
    r"|(?:cannot|can't|can not) be (?:determined|answered|found)"
    r"|(?:no|not enough|insufficient) information"
    r"|(?:i )?(?:do not|don't) know)\b",
    re.IGNORECASE,
)


def is_abstention(answer: str | None) -> bool:
    """Whether a stated answer declines to answer ("not in the documents", "cannot be determined",
    "no information", "I don't know") instead of giving one."""
    return bool(answer) and _ABSTENTION_RE.search(answer) is not None


def states_answer(text: str) -> bool:
    """Whether ``text`` contains a final-answer statement."""
    return _ANSWER_RE.search(text) is not None
