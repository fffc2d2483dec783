"""Answer quality: exact match and F1 of the scored answer (see :mod:`flarebench.bench.answers` for which
answer is scored and how), strict (stated answers only) and lenient (the last clause too)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flarebench.bench.answers import STATEMENT, final_answer, long_answer_text, score_final
from flarebench.bench.scorers.registry import HIGHER, Column, Group, scorer
from flarebench.strategies.records import Trace


def answer_row(trace: Trace, probe: Any, row: Mapping[str, Any]) -> dict[str, Any]:
    """``em``/``f1`` credit statement answers only; ``em_lenient``/``f1_lenient`` credit a
    last-clause answer too. ``answer`` is the scored answer, ``answer_rule`` the rule that read it,
    ``echo`` whether it only repeats the question (it then scores 0). A probe that raised scores 0
    whatever answer it holds. A long probe (``answer_type`` ``long``) is scored on its whole output
    (search calls and question echoes left out), statement or not: em 1 when it states every
    required fact and no wrong value, f1 the share of required facts it states
    (:func:`flarebench.bench.answers.score_answer`)."""
    answer, rule = final_answer(trace)
    question = getattr(probe, "question", None) or trace.question
    long = getattr(probe, "answer_type", None) == "long"
    if row["error"] is None:
        scored = long_answer_text(trace.output, question) if long else answer
        em_any, f1_any, echo = score_final(scored, question, probe)
    else:
        em_any, f1_any, echo = 0.0, 0.0, False  # a failed probe is a wrong answer, not a missing one
    em, f1 = (em_any, f1_any) if rule == STATEMENT or long else (0.0, 0.0)
    return {
        "em": em,
        "f1": f1,
        "em_lenient": em_any,
        "f1_lenient": f1_any,
        "answer": answer,
        "answer_rule": rule,
        "echo": echo,
    }


@scorer(
    Column(
        "em",
        'Mean exact match, 0-1, of the answer stated after the last "answer is" ("So the answer is X", '
        '"The answer is: X"; an output without that statement scores 0 here): SQuAD-normalised answer '
        "equals a gold alias; exact set match for list "
        "answers; for yes/no questions accuracy of the first yes/no word of the answer; for a long probe, 1 when "
        "its whole output states every required fact and no wrong value. An answer whose words "
        "all come from the question and that is not an exact gold match scores 0.",
        better=HIGHER,
        tolerance={"max_drop": 0.05},
    ),
    Column(
        "f1",
        "Mean F1, 0-1, of the stated answer (as for em): SQuAD token F1 (best alias) for single answers; "
        "set F1 over items for list answers; accuracy for yes/no questions; 0 for an answer echoing the question.",
        better=HIGHER,
        tolerance={"max_drop": 0.05},
    ),
    Column(
        "em_lenient",
        "As em, 0-1, but an output without a final-answer statement is scored on its last clause "
        "(the last sentence after its last colon, semicolon or is/are/was/were/be); such answers still count "
        "in incomplete_no_answer.",
        better=HIGHER,
    ),
    Column("f1_lenient", "As f1, 0-1, with the same last-clause fallback as em_lenient.", better=HIGHER),
    order=20,
    scores_errors=True,
    per_probe=answer_row,
    needs=("em", "f1"),
)
def answer(g: Group) -> dict[str, float]:
    """Means over every probe, a probe that raised counting 0."""

    def lenient(column: str, strict: str) -> float:
        # Rows made before the lenient columns existed: the strict score.
        return float(g.scores(column if column in g.rows else strict).mean())

    return {
        "em": float(g.scores("em").mean()),
        "f1": float(g.scores("f1").mean()),
        "em_lenient": lenient("em_lenient", "em"),
        "f1_lenient": lenient("f1_lenient", "f1"),
    }
