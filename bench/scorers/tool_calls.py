"""Tool calls (``tool_search``): how many calls the model made that could be run, how many could not,
and how often the search budget ran out. Read from each LM call's ``tool_calls``; empty (never 0) for
strategies whose calls were offered no tool."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from flarebench.bench.scorers.registry import Column, Group, Scoring, scorer
from flarebench.strategies.records import Trace

_ROW = ("tool_calls_parsed", "tool_calls_malformed", "tool_final_forced")


def tool_row(trace: Trace, probe: Any, row: Mapping[str, Any]) -> dict[str, Any]:
    """``tool_calls_parsed`` and ``tool_calls_malformed`` over the answer's turns, and
    ``tool_final_forced``: whether its last turn was offered no tool (the budget was spent, or the
    model replied with nothing); None for each when no call of the answer was offered a tool."""
    offered = [c for c in trace.lm_calls if c.tool_calls is not None]
    if not offered:
        return dict.fromkeys(_ROW)
    calls = [t for c in offered for t in c.tool_calls]
    return {
        "tool_calls_parsed": sum(t.ok for t in calls),
        "tool_calls_malformed": sum(not t.ok for t in calls),
        "tool_final_forced": trace.lm_calls[-1].tool_calls is None,
    }


def _values(g: Group, column: str) -> pd.Series:
    # Rows made before these columns existed: no tool calls.
    return pd.to_numeric(g.rows[column], errors="coerce").dropna() if column in g.rows else pd.Series(dtype=float)


def tool_notes(summary: pd.DataFrame, scoring: Scoring) -> list[str]:
    """Per strategy that offered tools: the calls attempted, parsed and malformed, and the forced
    last turns (a model that never calls its tool answers closed-book)."""
    notes = []
    for _, row in summary.iterrows():
        g = Group(row["strategy"], scoring.groups[row["strategy"]], scoring)
        parsed, malformed = _values(g, "tool_calls_parsed"), _values(g, "tool_calls_malformed")
        if parsed.empty:
            continue
        forced = _values(g, "tool_final_forced")
        attempted = int(parsed.sum() + malformed.sum())
        line = (
            f"tool calls of {row['strategy']}: {attempted} attempted, {int(parsed.sum())} parsed, "
            f"{int(malformed.sum())} malformed over {len(parsed)} answers; {int(forced.sum())} ended with "
            "a turn without the tool"
        )
        notes.append(line + ("; the model never called its tool: its answers are closed-book" if not attempted else ""))
    return notes


@scorer(
    Column(
        "tool_calls_parsed_per_q",
        "Mean tool calls per question that named the tool with its arguments, each run (tool_search); "
        "empty for strategies that offer no tool.",
        optional=True,
    ),
    Column(
        "tool_calls_malformed_per_q",
        "Mean tool calls per question that could not be read (unparseable markup or arguments, an unknown "
        "tool, a missing query), each answered with an error; empty for strategies that offer no tool.",
        optional=True,
    ),
    order=65,
    per_probe=tool_row,
    findings=tool_notes,
)
def tool_calls(g: Group) -> dict[str, Any]:
    """Over the answers whose turns were offered a tool (a probe that raised before its first turn
    has none)."""
    parsed, malformed = _values(g, "tool_calls_parsed"), _values(g, "tool_calls_malformed")
    return {
        "tool_calls_parsed_per_q": float(parsed.mean()) if len(parsed) else None,
        "tool_calls_malformed_per_q": float(malformed.mean()) if len(malformed) else None,
    }
