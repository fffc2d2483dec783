"""Command line: ``python -m flarebench.probes list``, ``python -m flarebench.probes validate PATH`` and
``python -m flarebench.probes corpus DIR --out SET`` (a probe set from a folder of documents).

Exit status: 0 when all is well, 2 for invalid data or bad usage (argparse's convention).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from flarebench.bench.options import Parser

from .load import PROBE_FORMATS, ProbeError, load_probe_set, resolve, shipped_names
from .validate import check_folder


def _list() -> int:
    rows, status = [], 0
    for name in shipped_names():
        try:
            ps = load_probe_set(name)
            rows.append((name, str(len(ps.probes)), ps.licence or "unknown licence"))
        except ProbeError as e:  # a broken shipped set is reported, not a traceback
            rows.append((name, "?", f"INVALID: {str(e).splitlines()[0]}"))
            status = 2
    widths = [max((len(r[i]) for r in rows), default=0) for i in range(2)]
    for name, count, licence in rows:
        print(f"{name:<{widths[0]}}  {count:>{widths[1]}}  {licence}")
    return status


def _validate(path: str, require_readme: bool, fmt: str = "auto") -> int:
    try:
        _, folder = resolve(path)
    except ProbeError:
        folder = path  # let the validator name what is missing, in its usual format
    if os.path.isfile(folder) or fmt not in ("auto", "flarebench"):
        # An official file (or a forced file format): validating it is loading it.
        try:
            ps = load_probe_set(path, fmt)
        except ProbeError as e:
            print(e)
            return 2
        print(f"{path}: ok ({len(ps.probes)} probes, {len(ps.corpus)} docs, format {ps.format})")
        return 0
    checked = check_folder(folder, require_readme=require_readme)
    if checked.problems:
        for line in checked.problems:
            print(line)
        return 2
    print(f"{path}: ok ({len(checked.probes)} probes, {len(checked.corpus)} docs)")
    return 0


def _corpus(args: argparse.Namespace) -> int:
    try:  # the corpus extra's parsers and splitter are imported only for this command
        from .corpus import Chunking, CorpusError, build
    except ModuleNotFoundError as e:
        print(f"python -m flarebench.probes corpus needs {e.name}: pip install 'flarebench[corpus]'")
        return 2
    try:
        built = build(
            Path(args.folder),
            Path(args.out),
            questions=Path(args.questions) if args.questions else None,
            chunking=Chunking(args.chunk_tokens, args.chunk_overlap),
            licence=args.licence,
            overwrite=args.overwrite,
        )
    except CorpusError as e:
        print(e)
        return 2
    except KeyboardInterrupt:  # the build writes its set whole or not at all: nothing to keep
        print(f"interrupted; {args.out} is as it was", file=sys.stderr)
        return 130
    files = f"{sum(built.files.values())} files ({', '.join(f'{n} {fmt}' for fmt, n in built.files.items())})"
    print(f"{args.out}: {built.chunks} chunks from {files}, {built.probes} probes")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    ap = Parser(prog="python -m flarebench.probes", description="List and validate probe sets.")
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="one line per shipped probe set: name, probe count, licence")
    v = sub.add_parser("validate", help="check a probe folder, a shipped name or an official dataset file")
    v.add_argument(
        "path",
        help="folder holding corpus.jsonl and probes.jsonl, a shipped set's name, or an official "
        "HotpotQA, 2WikiMultihopQA, ASQA or StrategyQA JSON file",
    )
    v.add_argument("--require-readme", action="store_true", help="also require README.md with a Licence line (folders)")
    v.add_argument(
        "--format",
        choices=PROBE_FORMATS,
        default="auto",
        help="how to read PATH (default auto: a folder is a flarebench set, a file is detected by its shape)",
    )
    c = sub.add_parser("corpus", help="build a probe set from a folder of Markdown, text, HTML and PDF files")
    c.add_argument("folder", metavar="DIR", help="the folder of documents (read with its sub-folders)")
    c.add_argument("--out", required=True, metavar="SET", help="the probe-set folder to write")
    c.add_argument(
        "--questions",
        "--probes",
        metavar="FILE",
        help="the questions, .jsonl or .csv (default: DIR/questions.jsonl or DIR/questions.csv)",
    )
    c.add_argument("--chunk-tokens", type=int, default=256, help="most tokens of text in a chunk (default 256)")
    c.add_argument("--chunk-overlap", type=int, default=32, help="most tokens two chunks share (default 32)")
    c.add_argument(
        "--licence", help="the Licence line of the set's README.md (default: the documents' own, not recorded)"
    )
    c.add_argument("--overwrite", action="store_true", help="replace the set built at SET (never other files)")
    args = ap.parse_args(argv)
    if args.command == "list":
        return _list()
    if args.command == "corpus":
        return _corpus(args)
    return _validate(args.path, args.require_readme, args.format)


if __name__ == "__main__":
    sys.exit(main())
