"""How far to trust a faithfulness method: its agreement with hand-labelled claims.

``probes/faithfulness/claims.jsonl`` holds claims labelled by hand (half supported paraphrases, half
hard negatives: a swapped number, version, name, relation or environment, the overridden default, a
negation, a step out of order), each judged against the passages it names. A fixed ``dev`` split
was used to design the offline method (:mod:`flarebench.bench.support`) and choose its constants;
the ``test`` split, written afterwards by other hands and never used for a choice, gives the
figures the docs and reports quote. ``flarebench agreement`` prints them, for the offline method or
for a judge endpoint (``--judge openai:MODEL``), so a team can check a judge before trusting it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from flarebench.probes.load import SHIPPED_DIR
from flarebench.probes.validate import CORPUS_FILE, by_line, check_corpus, read_jsonl, unknown_fields

__all__ = [
    "CLAIMS",
    "OFFLINE_TEST",
    "SPLITS",
    "Agreement",
    "AgreementError",
    "LabelledClaim",
    "judge_verdicts",
    "load_claims",
    "measure",
    "offline_verdicts",
]

CLAIMS = SHIPPED_DIR / "faithfulness" / "claims.jsonl"
SPLITS = ("test", "dev", "all")
# A claim's ``set``: a shipped probe set whose corpus holds its passages, or this folder's own corpus.
_OWN = "faithfulness"
_FIELDS = {
    "id": str,
    "set": str,
    "split": str,
    "claim": str,
    "doc_ids": list,
    "supported": bool,
    "kind": str,
    "note": str,
}


class AgreementError(ValueError):
    """A labelled-claims file that cannot be read: one ``FILE:LINE: FIELD: problem`` line."""


@dataclass(frozen=True)
class LabelledClaim:
    """One hand-labelled claim and the passages (title on the first line) it is judged against."""

    id: str
    set: str
    split: str
    claim: str
    supported: bool
    kind: str
    note: str
    contexts: tuple[str, ...]


def _read(path: Path) -> bytes:
    """The bytes of ``path``; an :class:`AgreementError` (line 0) when it cannot be read."""
    try:
        return path.read_bytes()
    except OSError as e:
        raise AgreementError(f"{path}:0: (file): {e.strerror or e}") from None


def _first(path: Path, problems: list[str]) -> None:
    """Raise the first of ``problems`` (``FILE:LINE: FIELD: problem`` lines about ``path``) in file
    order, if any."""
    if problems:
        raise AgreementError(by_line(str(path), problems)[0])


def _corpus(folder: Path, cache: dict[Path, dict[str, str]]) -> dict[str, str]:
    """doc id -> "title\\ntext" of ``folder/corpus.jsonl`` (read once), checked as a probe set's
    corpus is (:mod:`flarebench.probes.validate`)."""
    if folder not in cache:
        path = folder / CORPUS_FILE
        problems: list[str] = []
        rows = read_jsonl(str(path), _read(path), problems)
        check_corpus(str(path), rows, problems)
        _first(path, problems)
        cache[folder] = {d["id"]: f"{d['title']}\n{d['text']}" if d["title"] else d["text"] for _, d in rows}
    return cache[folder]


def load_claims(path: str | Path = CLAIMS, split: str = "test") -> list[LabelledClaim]:
    """The labelled claims of ``split`` (``test``, ``dev`` or ``all``) in ``path``, their passages
    looked up in the named probe set's corpus (``set``: a shipped set, ``faithfulness`` for the
    file's own folder, or a probe folder relative to the file). The file is read as probes.jsonl is
    (a UTF-8 byte order mark is allowed, an unknown field is refused). :class:`AgreementError`
    names the file, line and field of the first problem: a line that is not a JSON object, else the
    first claim at fault."""
    if split not in SPLITS:
        raise AgreementError(f"unknown split {split!r}; one of {', '.join(SPLITS)}")
    path = Path(path)
    problems: list[str] = []
    rows = read_jsonl(str(path), _read(path), problems)
    _first(path, problems)
    corpora: dict[Path, dict[str, str]] = {}
    first: dict[str, int] = {}  # claim id -> its line, across both splits
    out = []
    for n, rec in rows:

        def bad(fieldname: str, problem: str, n: int = n) -> AgreementError:
            return AgreementError(f"{path}:{n}: {fieldname}: {problem}")

        unknown_fields(str(path), n, rec, tuple(_FIELDS), problems)
        _first(path, problems)
        for name, kind in _FIELDS.items():
            if not isinstance(rec.get(name), kind):
                raise bad(name, f"missing or not a {kind.__name__}")
        for name in ("id", "set", "claim", "kind"):
            if not rec[name].strip():  # an empty claim is judged, and counted, as any other
                raise bad(name, "must not be empty")
        if rec["split"] not in ("dev", "test"):
            raise bad("split", f"{rec['split']!r} is neither dev nor test")
        if not all(isinstance(d, str) for d in rec["doc_ids"]):
            raise bad("doc_ids", "expected a list of doc ids (strings)")
        if rec["id"] in first:  # counted twice otherwise
            raise bad("id", f"duplicate id {rec['id']!r} (first on line {first[rec['id']]})")
        first[rec["id"]] = n
        if split != "all" and rec["split"] != split:
            continue
        folder = path.parent if rec["set"] == _OWN else SHIPPED_DIR / rec["set"]
        if not (folder / CORPUS_FILE).is_file():
            folder = (path.parent / rec["set"]).resolve()
        if not (folder / CORPUS_FILE).is_file():
            raise bad("set", f"no corpus for {rec['set']!r} (a shipped probe set, or a folder holding corpus.jsonl)")
        docs = _corpus(folder, corpora)
        missing = [d for d in rec["doc_ids"] if d not in docs]
        if missing or not rec["doc_ids"]:
            raise bad("doc_ids", f"not in {folder / CORPUS_FILE}: {', '.join(missing) or '(none given)'}")
        out.append(
            LabelledClaim(
                rec["id"],
                rec["set"],
                rec["split"],
                rec["claim"],
                rec["supported"],
                rec["kind"],
                rec["note"],
                tuple(docs[d] for d in rec["doc_ids"]),
            )
        )
    return out


@dataclass(frozen=True)
class Agreement:
    """A method's verdicts against the labels: counts, the three rates, and the claims it got wrong.
    ``undecided`` counts claims without a verdict (a judge reply that did not parse), left out."""

    method: str
    split: str
    supported_right: int
    supported_wrong: int
    unsupported_right: int
    unsupported_wrong: int
    undecided: int = 0
    by_kind: dict[str, tuple[int, int]] = field(default_factory=dict)  # kind -> (right, judged)
    wrong: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        return self.supported_right + self.supported_wrong + self.unsupported_right + self.unsupported_wrong

    @property
    def accuracy(self) -> float | None:
        return (self.supported_right + self.unsupported_right) / self.n if self.n else None

    @property
    def unsupported_recall(self) -> float | None:
        """Of the claims the passages do not support, the share the method rejects."""
        total = self.unsupported_right + self.unsupported_wrong
        return self.unsupported_right / total if total else None

    @property
    def supported_recall(self) -> float | None:
        """Of the supported claims (paraphrases), the share the method accepts."""
        total = self.supported_right + self.supported_wrong
        return self.supported_right / total if total else None

    def line(self) -> str:
        """One line for a report's notes."""
        if not self.n:
            return f"{self.method}: no claim of the {self.split} split got a verdict"

        def rate(x: float | None) -> str:
            return "n/a (none in the selection)" if x is None else f"{x:.2f}"

        return (
            f"{self.method} on the {self.split} split of the labelled claims ({self.n}): accuracy "
            f"{rate(self.accuracy)}, recall of unsupported claims {rate(self.unsupported_recall)}, "
            f"of supported paraphrases {rate(self.supported_recall)}"
        )


#: The offline method's measured agreement on the test split (``flarebench agreement``), as every
#: report's notes quote it; tests/test_agreement.py checks it against the live figures.
OFFLINE_TEST = Agreement(
    "lexical-slots", "test", supported_right=49, supported_wrong=35, unsupported_right=68, unsupported_wrong=16
)


def measure(method: str, split: str, claims: Sequence[LabelledClaim], verdicts: Iterable[bool | None]) -> Agreement:
    """Score ``verdicts`` (True: supported, None: no verdict) against the claims' labels."""
    counts = {(True, True): 0, (True, False): 0, (False, True): 0, (False, False): 0}
    kinds: dict[str, list[int]] = {}
    wrong, undecided = [], 0
    for c, said in zip(claims, verdicts, strict=True):
        if said is None:
            undecided += 1
            continue
        counts[(c.supported, said == c.supported)] += 1
        k = kinds.setdefault(c.kind, [0, 0])
        k[0] += said == c.supported
        k[1] += 1
        if said != c.supported:
            wrong.append(c.id)
    return Agreement(
        method,
        split,
        counts[(True, True)],
        counts[(True, False)],
        counts[(False, True)],
        counts[(False, False)],
        undecided,
        {k: (v[0], v[1]) for k, v in sorted(kinds.items())},
        tuple(wrong),
    )


def offline_verdicts(claims: Sequence[LabelledClaim]) -> list[bool]:
    """The offline method's verdict on each claim."""
    from flarebench.bench.support import claim_supported

    return [claim_supported(c.claim, c.contexts) for c in claims]


def judge_verdicts(judge, claims: Sequence[LabelledClaim], progress: Callable[[], None] = lambda: None) -> list:
    """A judge's verdict on each claim through ragas's faithfulness metric: supported when every
    statement the judge draws from the claim is supported by its passages (score 1); None when its
    reply did not parse or it drew no statement. Calls ``progress()`` after each claim."""
    import asyncio

    from flarebench.bench.faithfulness import _RagasScorer

    async def run() -> list:
        scorer = _RagasScorer(judge)
        out = []
        try:
            for c in claims:
                value, _statements, failures = await scorer.score("", c.claim, list(c.contexts))
                out.append(None if failures or value is None else value >= 1.0)
                progress()
        finally:
            await scorer.aclose()
        return out

    return asyncio.run(run())
