"""Sentence splitting with rules that ship in the package (pysbd): no NLTK data download."""

from __future__ import annotations

import functools
import re

import pysbd


@functools.lru_cache(maxsize=1)
def _segmenter() -> pysbd.Segmenter:
    return pysbd.Segmenter(language="en", clean=False, char_span=False)


#: pysbd's time grows with the square of a text's length (a 200 KB line: two minutes): a text longer
#: than this is first cut, after a sentence's end, into pieces of about :data:`_PIECE` characters,
#: each split on its own. Shorter texts (every answer, every chunked passage) are split whole.
_LONG = 8_000
_PIECE = 2_000
#: A sentence's end that is no abbreviation's ("Dr. Smith"): three lowercase letters (or digits)
#: before the stop, white space, then what starts a sentence; or an ideographic full stop, "!" or "?".
_END = re.compile(r"(?<=[a-z0-9]{3}[.!?])\s+(?=[A-Z0-9\"\u201c(\[])|(?<=[\u3002\uff01\uff1f])")
_SPACE = re.compile(r"\s+")


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences, keeping each one's trailing whitespace so that joining the
    pieces gives back ``text`` exactly."""
    if len(text) <= _LONG:
        return list(_split(text))
    return [sentence for piece in _pieces(text) for sentence in _split(piece)]


def _pieces(text: str) -> list[str]:
    """``text`` cut after the first sentence end past every :data:`_PIECE` characters; where none
    comes within four pieces' length (no sentence ends: a table, a list made one line), after the
    next white space there, else right there. Joined, the pieces give back ``text``."""
    pieces, start = [], 0
    while len(text) - start > _PIECE:
        far = start + 4 * _PIECE
        end = _END.search(text, start + _PIECE, far) or _SPACE.search(text, far)
        cut = end.end() if end else min(far, len(text))
        pieces.append(text[start:cut])
        start = cut
    return [*pieces, text[start:]] if start < len(text) else pieces


# pysbd takes milliseconds a text, and scoring splits each answer several times (the stated
# answer, the claims, the streaming timeline), for the summary, the report and triggers.csv.
@functools.lru_cache(maxsize=4096)
def _split(text: str) -> tuple[str, ...]:
    if not text.strip():
        return (text,) if text else ()
    # pysbd keeps the words but not always the whitespace between sentences: find where each
    # sentence starts in the original and cut there, so the split is lossless.
    starts, pos = [0], 0
    for piece in _segmenter().segment(text):
        at = text.find(piece.strip(), pos)
        if at < 0:
            return (text,)
        if at > 0 and pos > 0:
            starts.append(at)
        pos = at + len(piece.strip())
    return tuple(text[a:b] for a, b in zip(starts, starts[1:] + [len(text)]))


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` (with its trailing whitespace), or all of it if there is one."""
    sentences = split_sentences(text)
    return sentences[0] if sentences else text
