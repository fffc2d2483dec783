"""Prompt layout, final-answer extraction and sentence splitting."""

import pytest

from flarebench.strategies.prompts import EXEMPLARS, PromptTemplate, extract_answer
from flarebench.strategies.records import Passage
from flarebench.strategies.sentences import first_sentence, split_sentences


def test_layout_static_then_docs_then_question_then_answer_so_far():
    t = PromptTemplate(open_book=True)
    p = t.build("Who is X?", [Passage("a", "Doc A", "text a"), Passage("b", "Doc B", "text  b\nmore")], " So far.")
    assert p.static == t.static  # identical across calls, so it can be evaluated once
    assert p.dynamic == "Documents:\n[1] Doc A: text a\n[2] Doc B: text b more\nQuestion: Who is X?\nAnswer: So far."
    assert p.text.index(EXEMPLARS[-1].answer) < p.text.index("[1] Doc A")


def test_closed_book_has_no_documents():
    t = PromptTemplate(open_book=False)
    assert "Documents:" not in t.build("Q?").text
    assert all(ex.question in t.static and ex.answer in t.static for ex in EXEMPLARS)


@pytest.mark.parametrize(
    "output, answer",
    [
        ("A is B. So the answer is Rosa Tull.", "Rosa Tull"),
        ("So the answer is: 2", "2"),
        ("the answer is nurse, actor.\nQuestion: next", "nurse, actor"),
        ("So the answer is 0204-03-12.", "0204-03-12"),
        ("No statement here.", None),
        ("So the answer is .", None),
        # the last statement: an answer that corrects itself ends with the one it gives
        ("So the answer is Patsy Cormier. She is his aunt. So the answer is Sol Cormier.", "Sol Cormier"),
        ("The answer is:\n\nRosa Tull.", "Rosa Tull"),  # begun on the next line
        # a small number followed by another sentence: "6. Each" is no numbered list here
        ("So the answer is 6. Each broker handles 40,000 messages.", "6"),
        ("So the answer is 15. Escalate after that.", "15"),
        ("The answer is 3. The answer is 3. The answer", "3"),
        ("So the answer is Dr. Smith. He knows.", "Dr. Smith"),
    ],
)
def test_extract_answer(output, answer):
    assert extract_answer(output) == answer


@pytest.mark.parametrize(
    "text",
    [
        "The mother of Ann is Bo. Bo is a nurse. So the answer is nurse.",
        "  Dr. Smith is 3.5 m tall!  Next one",
        "",
        "no end",
    ],
)
def test_split_sentences_is_lossless(text):
    assert "".join(split_sentences(text)) == text


def test_split_sentences_cuts_at_boundaries():
    assert split_sentences("Ann is a nurse. Dr. Who is here! Next") == ["Ann is a nurse. ", "Dr. Who is here! ", "Next"]
    assert first_sentence(" The date is 0204-03-12. So the answer is 0204-03-12.") == " The date is 0204-03-12. "


def test_a_very_long_line_is_split_in_pieces_of_bounded_length_as_it_would_be_whole(monkeypatch):
    # pysbd's time grows with the square of the length: one 200 KB line (HTML made text) took minutes.
    from flarebench.strategies import sentences

    words = "alpha beta gamma delta Dr. Ann went home to the city".split()
    text = " ".join(
        f"Number {i} " + " ".join(words[(i * 7 + j) % len(words)] for j in range(12)) + "." for i in range(2000)
    )
    whole = list(sentences._split(text[:12_000]))  # the same text split in one piece
    seen = []
    real = sentences._segmenter()
    monkeypatch.setattr(
        sentences,
        "_segmenter",
        lambda: type("Spy", (), {"segment": lambda _, t: seen.append(len(t)) or real.segment(t)})(),
    )
    sentences._split.cache_clear()
    pieces = split_sentences(text)
    assert "".join(pieces) == text and len(text) > 100_000
    assert max(seen) < 2_500 and len(seen) > 50  # each piece split on its own
    assert split_sentences(text[:12_000]) == whole  # the cuts fall where pysbd cuts anyway
    assert split_sentences(text[:8_000]) == list(sentences._split(text[:8_000]))  # shorter: split whole
    # Text without a sentence end a piece could be cut at (no spaces, no stops) is cut all the same.
    seen.clear()
    assert "".join(split_sentences("x" * 30_000)) == "x" * 30_000 and max(seen) <= 8_000


def test_a_changed_split_does_not_change_the_next_split_of_the_same_text():
    # The split is cached: each caller gets a list of its own.
    text = "Ann is a nurse. Bob is a cook."
    first = split_sentences(text)
    first.pop()
    assert split_sentences(text) == ["Ann is a nurse. ", "Bob is a cook."]


def test_token_texts_give_a_split_letter_to_the_token_that_completes_it():
    from flarebench.strategies.lm import token_texts
    from flarebench.strategies.records import LMCall
    from flarebench.strategies.steps import cut_tokens

    pieces = [b" Zo", b"\xc3", b"\xab", b" is", b" here.", b" Next"]
    texts = token_texts(pieces)
    assert texts == [" Zo", "", "ë", " is", " here.", " Next"]
    assert "".join(texts) == b"".join(pieces).decode()
    # Cut at the first sentence (" Zoë is here."): exactly the tokens before " Next".
    call = LMCall("draft", 1, 1, 6, "".join(texts), "stop", 0.0, tokens=texts, logprobs=[0.0] * 6)
    kept, _ = cut_tokens(call, len(" Zoë is here."))
    assert kept == texts[:5]


def test_long_templates_show_multi_sentence_answers_without_a_final_answer_statement():
    from flarebench.strategies.prompts import LONG_EXEMPLARS, OPEN_BOOK, template

    for open_book in (True, False):
        long, short = template("long", open_book), template("short", open_book)
        assert long is not short and long.open_book == short.open_book == open_book
        assert "So the answer is" in short.static and "answer is" not in long.static.lower()
        assert all(ex.answer in long.static for ex in LONG_EXEMPLARS)
        assert ("Documents:" in long.static) == open_book
    assert template() is OPEN_BOOK
    assert all(len(split_sentences(ex.answer)) >= 3 for ex in LONG_EXEMPLARS)


@pytest.mark.parametrize(
    "name",
    [
        "no_retrieval",
        "single_time",
        "fixed_interval",
        "ircot",
        "self_ask",
        "flare_direct",
        "flare_instruct",
        "adaptive",
    ],
)
def test_every_strategy_answers_in_the_form_it_is_given(name):
    """A long-form strategy sends only long-form prompts (and a short one only short ones), and its
    request fingerprint tells the two apart; the loop itself is unchanged."""
    from flarebench.strategies.base import LONG_ANSWER_DEFAULTS
    from flarebench.strategies.registry import parse_spec
    from tests.scripted import ScriptedLM, ScriptedRetriever

    statics = {}
    # adaptive's gate fires on this draft (p 0.5 <= 0.5): it sends its closed-book and open-book prompts
    spec = "adaptive:threshold=0.5" if name == "adaptive" else name
    for defaults in (None, LONG_ANSWER_DEFAULTS):
        strategy = parse_spec(spec, defaults)
        lm = ScriptedLM([(["The", " mother", " is", " Ann", "."], [0.5] * 5), " So the answer is Ann."])
        strategy.run("Who is the mother of Bo?", lm, ScriptedRetriever([["d1", "d2", "d3"]]))
        # the answer's own prompts: FLARE direct's question-generation prompt is the same in both forms
        sent = {r.prompt.static for r in lm.requests if r.purpose != "query"}
        expected = set(strategy.static_prompts()) if name == "adaptive" else {strategy.template.static}
        assert sent == expected and strategy.template.static in sent, name
        statics[strategy.answer_form] = (strategy.template.static, strategy.request_sha256(), strategy.max_tokens)
    assert statics["short"][0] != statics["long"][0] and statics["short"][1] != statics["long"][1]
    assert (statics["short"][2], statics["long"][2]) == (128, 256)
    assert parse_spec(f"{name}:max_tokens=100", LONG_ANSWER_DEFAULTS).max_tokens == 100  # the spec wins
