"""``python -m flarebench.bench.scorers``: the documentation tables generated from the scorers' declarations.

Two tables are written between marker comments, never by hand: README.md's column table ("What
each number means": every summary column, its definition and its gate direction) and
docs/metrics.md's table of the metrics a tolerance may name ("Regression gate": which way each is
better, and its default bound). Without options the tables are printed; ``--write`` rewrites them
in the checkout's files. ``tests/test_scorers.py`` fails while a committed table is not current.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from flarebench.bench.scorers.registry import column_table

#: The checkout holding README.md and docs/ (bench/scorers/ is two folders down).
ROOT = Path(__file__).resolve().parents[2]

_BEGIN = "<!-- generated: {name} (python -m flarebench.bench.scorers --write; edit bench/scorers/, not here) -->"
_END = "<!-- end generated: {name} -->"


def tables() -> dict[tuple[str, str], str]:
    """Each generated table by (file relative to the checkout, block name)."""
    from flarebench.bench.gate import tolerance_table

    return {("README.md", "columns"): column_table(), ("docs/metrics.md", "gate"): tolerance_table()}


def spliced(text: str, name: str, table: str) -> str:
    """``text`` with the block ``name`` holding ``table``; ValueError when the markers are missing."""
    begin, end = _BEGIN.format(name=name), _END.format(name=name)
    head, found, rest = text.partition(begin)
    if not found or end not in rest:
        raise ValueError(f"no generated block {name!r}: expected the lines {begin} and {end}")
    return f"{head}{begin}\n\n{table}\n\n{end}{rest.partition(end)[2]}"


def stale(root: Path = ROOT) -> list[str]:
    """The files whose generated tables differ from what the declarations give."""
    out = []
    for (file, name), table in tables().items():
        text = (root / file).read_text(encoding="utf-8")
        if spliced(text, name, table) != text:
            out.append(file)
    return out


def write(root: Path = ROOT) -> list[str]:
    """Rewrite every generated table that is not current; returns the files written."""
    written = []
    for (file, name), table in tables().items():
        path = root / file
        text = path.read_text(encoding="utf-8")
        new = spliced(text, name, table)
        if new != text:
            path.write_text(new, encoding="utf-8")
            written.append(file)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m flarebench.bench.scorers",
        description="Print the tables generated from the scorers' declarations, or write them into the docs.",
    )
    parser.add_argument("--write", action="store_true", help="rewrite the tables in README.md and docs/metrics.md")
    args = parser.parse_args(argv)
    if args.write:
        written = write()
        print("\n".join(f"wrote {file}" for file in written) if written else "the tables are current")
        return 0
    for (file, name), table in tables().items():
        print(f"{file} ({name}):\n\n{table}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
