"""Post-hoc trigger scoring: every probability trigger judged again from one run's recorded drafts.

A strategy with a confidence trigger (flare_direct, adaptive) records each draft it judged as an LM
call of ``purpose`` "draft", with the logprobs of its tokens and, where they were asked for (its
trigger, or ``--record-topk K``), the top alternatives and entropies of each. From those records
alone, for every probability trigger (:class:`~flarebench.strategies.triggers.TokenTrigger` in the
trigger registry) that the drafts carry enough for, and for every strategy:

* each draft is rebuilt as the strategy's trigger saw it (its ``judged_draft``: flare_direct's first
  sentence, adaptive's whole output) and scored with the trigger's own ``values`` and ``aggregate``
  over every token (``ignore_terms`` / ``ignore_known`` are not applied: they need the run's
  documents); a draft the trigger would not judge (empty, no logprobs) has no score and never fires;
* per probe, the least confident score over its drafts (the lowest; the highest for a trigger that
  fires high), and its AUROC for telling wrong answers from right ones, as ``gate_auroc`` reads it
  (:func:`flarebench.bench.confidence.auroc`: the chance that a random right answer, em 1, is judged
  more confident than a random wrong one, em 0; a long answer graded by its share of facts);
  undefined (empty) when the probes are all of one quality; probes that raised are left out;
* at each threshold of the trigger's ``grid``, ``retrieval_rate``: the share of the drafts that
  would fire (drafts firing / drafts).

These are estimates, not replays: at another threshold the drafts after the first one that fired
differently would have been written with other documents in context. A trigger the drafts do not
carry enough for (``margin`` and ``entropy`` without alternatives) is skipped, with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import pandas as pd

from flarebench.bench.confidence import auroc
from flarebench.bench.scorers.facts import answer_quality
from flarebench.strategies import triggers
from flarebench.strategies.records import DRAFT, LMCall, Trace
from flarebench.strategies.steps import Sentence
from flarebench.strategies.triggers import Gated, TokenTrigger

TRIGGERS_CSV = "triggers.csv"
#: The columns of triggers.csv: one row per (strategy, trigger, threshold of its grid); the
#: per-trigger values (probes, wrong, drafts, auroc) repeat on each of its rows.
COLUMNS = ("strategy", "trigger", "probes", "wrong", "drafts", "auroc", "threshold", "retrieval_rate")
#: How to record what a skipped trigger needs.
HINT = "run with --record-topk K to record it"
#: What every reader of the rates must know.
CAVEAT = (
    "post-hoc rates count the recorded run's drafts: at another threshold, the drafts after one that "
    "fired differently would have been written from other documents, so they estimate a run at that "
    "threshold, they do not replay it"
)


@dataclass(frozen=True)
class Skipped:
    """A trigger (None: every one) not scored on a strategy's drafts, and why."""

    strategy: str
    trigger: str | None
    reason: str


@dataclass
class TriggerScores:
    """The tidy rows (:data:`COLUMNS`), the triggers skipped per strategy with why, and notes."""

    frame: pd.DataFrame
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def skipped_lines(self) -> list[str]:
        """One line per (trigger, reason), naming the strategies it applies to."""
        groups: dict[tuple[str | None, str], list[str]] = {}
        for s in self.skipped:
            groups.setdefault((s.trigger, s.reason), []).append(s.strategy)
        return [
            f"{trigger or 'every probability trigger'} on {', '.join(specs)}: {reason}"
            for (trigger, reason), specs in groups.items()
        ]

    def auroc_table(self) -> pd.DataFrame:
        """One row per (strategy, trigger): probes, wrong, drafts, auroc."""
        return self.frame.drop(columns=["threshold", "retrieval_rate"]).drop_duplicates(["strategy", "trigger"])

    def rate_tables(self) -> dict[str, pd.DataFrame]:
        """Per trigger, one row per strategy and one column per threshold of its grid: the rate."""
        out = {}
        for name, rows in self.frame.groupby("trigger", sort=False):
            table = rows.pivot(index="strategy", columns="threshold", values="retrieval_rate")
            table = table.reindex(list(dict.fromkeys(rows["strategy"])))
            table.columns = [f"{t:g}" for t in table.columns]
            out[str(name)] = table.reset_index()
        return out


def draft_calls(trace: Trace) -> list[LMCall]:
    """The trace's draft calls, in order."""
    return [c for c in trace.lm_calls if c.purpose == DRAFT]


def probability_triggers() -> list[type[TokenTrigger]]:
    """The registered probability triggers, in registration order."""
    classes = [triggers.get(n) for n in triggers.names()]
    return [c for c in classes if issubclass(c, TokenTrigger)]


def _judges(spec: str):
    """The strategy class's ``judged_draft`` for a spec, or None (not a gated strategy, or unknown)."""
    from flarebench.strategies.registry import SpecError, get

    try:
        cls = get(spec.strip().partition(":")[0].strip())
    except SpecError:
        return None
    return cls.judged_draft if issubclass(cls, Gated) else None


def lacks(cls: type[TokenTrigger], calls: Iterable[LMCall]) -> str | None:
    """What the draft calls lack for trigger ``cls`` (None when they carry what it needs)."""
    calls = [c for c in calls if c.tokens]  # an empty draft is never judged: it needs nothing
    if any(c.logprobs is None for c in calls):
        return "the drafts carry no logprobs"
    if cls.top_logprobs:
        if any(c.top_logprobs is None for c in calls):
            return "the drafts carry no per-token alternatives"
        fewest = min((len(top) for c in calls for top in c.top_logprobs), default=cls.top_logprobs)
        if fewest < cls.top_logprobs:
            return f"the drafts carry {fewest} alternative(s) per token, {cls.name} needs {cls.top_logprobs}"
    if cls.entropy and any(c.entropies is None and c.top_logprobs is None for c in calls):
        return "the drafts carry neither entropies nor per-token alternatives"
    return None


def draft_score(trigger: TokenTrigger, draft: Sentence) -> float | None:
    """The trigger's score of one draft over every token; None for a draft it does not judge."""
    return trigger.score(trigger.values(draft)) if trigger.judged(draft) else None


def score_triggers(traces: list[Trace], rows: pd.DataFrame) -> TriggerScores:
    """Every probability trigger judged again on every strategy's recorded drafts (see the module).

    ``rows`` are the run's per-probe rows (:func:`flarebench.bench.report.probe_rows`: ``strategy``,
    ``probe_id``, ``error``, ``em``); traces without a row, and those whose probe raised, are left
    out. Strategies come in the order they first appear in ``traces``."""
    wanted = {}
    if not rows.empty:
        graded = rows.assign(quality=answer_quality(rows))
        for r in graded[["strategy", "probe_id", "error", "em", "quality"]].itertuples(index=False):
            failed = isinstance(r.error, str) and r.error != ""
            if not failed:
                wanted[(r.strategy, r.probe_id)] = (float(r.quality), float(r.em) > 0)
    by_spec: dict[str, list[tuple[Trace, tuple[float, bool]]]] = {}
    for t in traces:
        if (t.strategy, t.probe_id) in wanted:
            by_spec.setdefault(t.strategy, []).append((t, wanted[(t.strategy, t.probe_id)]))
    out: list[dict] = []
    skipped: list[Skipped] = []
    notes: list[str] = []
    for spec, answered in by_spec.items():
        calls = [c for t, _ in answered for c in draft_calls(t)]
        if not calls:
            continue
        judged_draft = _judges(spec)
        if judged_draft is None:
            skipped.append(Skipped(spec, None, "its drafts are not judged by a trigger flarebench knows"))
            continue
        if any(s.gate and "ignored" in s.gate for t, _ in answered for s in t.steps):
            notes.append(
                f"{spec} ran with ignore_terms or ignore_known: the post-hoc scores judge every token of its drafts"
            )
        # A draft without logprobs is not judged (its probe is left out when it has no other).
        drafted = [c for c in calls if c.tokens]
        judged = [c for c in drafted if c.logprobs is not None]
        if not judged:
            skipped.append(Skipped(spec, None, f"the drafts carry no logprobs ({HINT})"))
            continue
        if len(judged) < len(drafted):
            notes.append(
                f"{spec}: {len(drafted) - len(judged)} of its {len(drafted)} drafts carry no logprobs: "
                "they are not judged, and a probe without a judged draft is left out"
            )
        drafts = [[judged_draft(c) for c in draft_calls(t)] for t, _ in answered]
        judged_as = [j for _, j in answered]
        for cls in probability_triggers():
            missing = lacks(cls, judged)
            if missing:
                skipped.append(Skipped(spec, cls.name, f"{missing} ({HINT})"))
                continue
            if cls.entropy and any(c.entropies is None for c in judged):
                notes.append(
                    f"{spec}: entropy bounded from its drafts' top alternatives (no entropies recorded): "
                    "a lower bound of the entropy"
                )
            out.extend(_rows(spec, cls, drafts, judged_as))
    frame = pd.DataFrame(out, columns=list(COLUMNS))
    return TriggerScores(frame, skipped, notes)


def _rows(
    spec: str, cls: type[TokenTrigger], drafts: list[list[Sentence]], judged: list[tuple[float, bool]]
) -> list[dict]:
    """The rows of one (strategy, trigger): one per threshold of the trigger's grid; ``judged`` is
    each probe's (:func:`~flarebench.bench.scorers.facts.answer_quality`, whether it is right)."""
    trigger = cls()  # its default threshold: the scores do not depend on it
    worst = max if cls.fires_high else min
    scores = [[s for s in (draft_score(trigger, d) for d in probe) if s is not None] for probe in drafts]
    per_probe = [(worst(s), q, right) for s, (q, right) in zip(scores, judged) if s]
    # Higher = more confident, as gate_auroc reads it: a trigger that fires high enters negated.
    sign = -1.0 if cls.fires_high else 1.0
    area = auroc([sign * s for s, _, _ in per_probe], [q for _, q, _ in per_probe]) if per_probe else math.nan
    n_drafts = sum(len(probe) for probe in drafts)
    flat = [s for probe in scores for s in probe]
    base = {
        "strategy": spec,
        "trigger": cls.name,
        "probes": len(per_probe),
        "wrong": sum(1 for _, _, right in per_probe if not right),
        "drafts": n_drafts,
        "auroc": None if math.isnan(area) else area,
    }
    return [
        {
            **base,
            "threshold": t,
            "retrieval_rate": sum(cls.fires_at(s, t) for s in flat) / n_drafts if n_drafts else None,
        }
        for t in cls.grid
    ]


def has_drafts(traces: Iterable[Trace]) -> bool:
    """Whether any trace holds a draft call (only then is there anything to score)."""
    return any(c.purpose == DRAFT for t in traces for c in t.lm_calls)


def csv_text(scores: TriggerScores) -> str:
    """triggers.csv's text (plain decimals; an undefined AUROC empty)."""
    return scores.frame.to_csv(index=False, float_format="%.6g")


def format_tables(scores: TriggerScores, fmt: str = "github") -> str:
    """The two tables ``flarebench score`` prints: AUROC per (strategy, trigger), then per trigger the
    retrieval rate at each threshold of its grid; then what was skipped, the notes and the caveat."""
    from tabulate import tabulate

    def table(frame: pd.DataFrame) -> str:
        return tabulate(
            frame.astype(object).where(frame.notna(), None),
            headers="keys",
            tablefmt=fmt,
            showindex=False,
            floatfmt=".3f",
            missingval="",
        )

    parts = []
    if not scores.frame.empty:
        parts.append(
            "triggers post hoc (triggers.csv): AUROC of each probability trigger's least confident draft score "
            "per probe for telling right answers from wrong ones (long answers graded by their share of facts; "
            "empty: all of one quality)\n" + table(scores.auroc_table())
        )
        for name, rates in scores.rate_tables().items():
            side = ">=" if triggers.fires_high(name) else "<="
            parts.append(
                f"{name}: share of drafts that would fire at score {side} threshold (drafts firing / drafts)\n"
                + table(rates)
            )
    lines = [f"skipped: {s}" for s in scores.skipped_lines()] + [f"note: {n}" for n in dict.fromkeys(scores.notes)]
    if not scores.frame.empty:
        lines.append(f"note: {CAVEAT}")
    if lines:
        parts.append("\n".join(lines))
    return "\n\n".join(parts)
