"""Where a key sits in a TOML or JSON file a user edits (the config file, a price table, a
baseline), so that an error about it names the line: ``FILE:LINE: key: what is wrong``."""

from __future__ import annotations

import re


def line_of(text: str, *keys: str) -> int | str:
    """The line of the last of ``keys`` found, each looked for from the line of the one before (a
    nested key: ``models``, ``llamacpp:*``, ``prompt_per_1m``): assigned in TOML (``key =``, a dotted
    ``a.key =``, in an inline table too), opening a TOML table (``[a.key]``, or ``[key.sub]``, which
    opens it too) or a JSON member (``"key":``); '?' when the first key is not found."""
    lines = text.splitlines()
    found: int | str = "?"
    start = 0
    for key in keys:
        name = rf"[\"']?{re.escape(key)}[\"']?"
        assigned = re.compile(rf"(?:^|[{{,])\s*(?:[\w\"'-]+\s*\.\s*)*{name}\s*=")
        table = re.compile(rf"\s*\[+\s*(?:[^\]]*\.)?\s*{name}\s*[\].]")
        member = re.compile(rf"[\"']{re.escape(key)}[\"']\s*:")
        at = next(
            (
                n
                for n in range(start, len(lines))
                if assigned.search(lines[n]) or table.match(lines[n]) or member.search(lines[n])
            ),
            None,
        )
        if at is None:
            break
        found, start = at + 1, at
    return found
