"""Text in summary.md and adoption.md: as a cell of a Markdown table, where a strategy or probe label
may hold a ``|`` (a plugin's name, a parameter's value) that would otherwise end the cell and shift
every value after it one column along; as prose, where HTML markup would be rendered; and as code,
where a backtick in a name (a probe folder's) would end the span and let what follows render."""

from __future__ import annotations

import html
import re
from typing import Any


def cell(value: Any) -> Any:
    """``value`` with each ``|`` escaped when it is text; any other value as it is."""
    return value.replace("|", "\\|") if isinstance(value, str) else value


def text(value: str) -> str:
    """Text of the user's (a run folder's name) in Markdown prose: its HTML markup shown as written,
    not rendered (a CI job summary renders HTML in Markdown)."""
    return html.escape(value, quote=False)


def code(value: str) -> str:
    """``value`` as a Markdown code span, shown as written: fenced by one backtick more than its
    longest run of them, padded with a space where it starts or ends with one (CommonMark), its line
    breaks made spaces (as a span shows them; a line of its own could start an HTML block)."""
    value = str(value).replace("\r\n", " ").replace("\r", " ").replace("\n", " ")
    longest = max((len(run) for run in re.findall(r"`+", value)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if value[:1] == "`" or value[-1:] == "`" else ""
    return f"{fence}{pad}{value}{pad}{fence}"
