"""The ``flarebench`` console script (also ``python -m bench``).

``flarebench run [OPTIONS]`` runs strategies exactly as ``pytest bench [OPTIONS]`` does (the same
option names); ``flarebench score RUN_DIR`` recomputes the metrics of a run from its traces.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.options import RUN_OPTIONS


class UserError(Exception):
    """A mistake in the command line or the files it names: printed as one line, exit status 2."""


def _run(args: argparse.Namespace) -> int:
    from bench.runner import StrategyRefused
    from bench.session import BenchSession, ConfigError

    try:
        session = BenchSession(**{o.dest: getattr(args, o.dest) for o in RUN_OPTIONS})
    except ConfigError as e:
        raise UserError(str(e)) from None
    failed = []
    gating = session.gating
    try:
        gating.warm_up(session)
        for spec in session.specs:
            try:
                traces = session.run(spec)
            except StrategyRefused as e:
                print(f"flarebench: {e}", file=sys.stderr)
                failed.append(spec)
                continue
            if any(t.error for t in traces):
                failed.append(spec)
            # The reference runs first, so its latency is known when each gated spec is checked.
            lines = gating.check(spec, session.summary())
            if gating.baseline is not None and spec in gating.wanted:
                gating.write_verdicts(session.run_dir)
            if lines:
                print(f"flarebench: {spec} breaks the gate {gating.baseline.path}:", file=sys.stderr)
                for line in lines:
                    print(f"  {line}", file=sys.stderr)
                if spec not in failed:
                    failed.append(spec)
    finally:
        session.close()
    print(session.table())
    print(f"run folder: {session.run_dir}")
    if gating.baseline is not None:
        if gating.difference:
            print(f"gate across configurations; first difference: {gating.difference}")
        broken = [spec for spec, lines in gating.verdicts.items() if lines]
        print(
            f"gate {gating.baseline.path} (latency reference {gating.reference}): "
            f"{len(gating.verdicts) - len(broken)} passed, {len(broken)} broken"
        )
    if gating.save_to is not None:
        note = gating.save(session.summary())
        print(note, file=sys.stderr if note.startswith("baseline not saved") else sys.stdout)
        if note.startswith("baseline not saved") and not failed:
            return 1
    if failed:
        print(f"flarebench: failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def _score(args: argparse.Namespace) -> int:
    from bench.report import format_table, summary_frame, write_summary
    from bench.runner import TRACES, TraceLog
    from bench.session import RUN_JSON
    from probes.load import ProbeError, load_probe_set

    run_dir = Path(args.run_dir)
    run_json = run_dir / RUN_JSON
    try:
        info = json.loads(run_json.read_text(encoding="utf-8"))
        config = info["config"]
        probes_cfg = config["probes"]
    except FileNotFoundError:
        raise UserError(f"{run_json}: not found; RUN_DIR must be a run folder") from None
    except (ValueError, KeyError) as e:
        raise UserError(f"{run_json}: not a flarebench run.json ({e})") from None
    try:
        probe_set = load_probe_set(probes_cfg["source"], probes_cfg.get("format", "auto"))
    except ProbeError as e:
        raise UserError(f"{run_json}: probes.source: {str(e).splitlines()[0]}") from None
    if probe_set.hash != probes_cfg["hash"]:
        print(
            f"flarebench: warning: probe set {probe_set.path} changed since the run; "
            "scoring against its current answers",
            file=sys.stderr,
        )
    try:
        traces = TraceLog(run_dir / TRACES).read()
    except (ValueError, KeyError, TypeError) as e:
        raise UserError(f"{run_dir / TRACES}: unreadable trace ({e})") from None
    price, reference = _scoring(args, info, run_json)
    faithfulness = _faithfulness(args, info, traces, probe_set)
    summary = summary_frame(
        traces,
        {p.id: p for p in probe_set.probes},
        order=list(config["strategies"]),
        price=price,
        reference=reference,
        faithfulness=faithfulness,
    )
    write_summary(run_dir, summary, config)
    print(format_table(summary))
    for field in args.by or []:
        from bench.breakdown import BreakdownError, breakdown
        from bench.report import probe_rows, write_atomic

        try:
            table = breakdown(
                probe_rows(traces, {p.id: p for p in probe_set.probes}), field, list(config["strategies"])
            )
        except BreakdownError as e:
            raise UserError(str(e)) from None
        write_atomic(run_dir / f"breakdown_{field}.csv", table.to_csv(index=False, float_format="%.6g"))
        print(f"\nby {field} (breakdown_{field}.csv):\n{format_table(table)}")
    return 0


def _faithfulness(args: argparse.Namespace, info: dict, traces: list, probe_set) -> dict:
    """Faithfulness rows of the traces: with the judge given to `score`, else the judge the run
    recorded (its key read again from the environment), else the offline method."""
    from bench.faithfulness import JudgeError, faithfulness_rows, parse_judge

    recorded = ((info.get("scoring") or {}) if isinstance(info.get("scoring"), dict) else {}).get("judge") or {}
    spec = args.judge or recorded.get("spec")
    base_url = args.judge_base_url or (recorded.get("base_url") if not args.judge else None)
    try:
        judge = parse_judge(spec, base_url)
        return faithfulness_rows(traces, probe_set.docs_by_id, judge)
    except (JudgeError, KeyError) as e:
        raise UserError(f"faithfulness: {e}") from None


def _scoring(args: argparse.Namespace, info: dict, run_json: Path):
    """The price and delta reference to score with: the options given to `score`, else those the
    run recorded in run.json (``scoring``), else the defaults (the shipped price table)."""
    from bench.prices import Price, PriceError, price_for
    from bench.uncertainty import DEFAULT_REFERENCE

    recorded = info.get("scoring") if isinstance(info.get("scoring"), dict) else None
    reference = args.reference or (recorded or {}).get("reference") or DEFAULT_REFERENCE
    model = info["config"].get("lm", {}).get("name", "")
    try:
        if args.prices:
            return price_for(model, args.prices), reference
        if recorded is not None:
            return (Price.from_record(recorded["price"]) if recorded.get("price") else None), reference
        return price_for(model), reference
    except PriceError as e:
        raise UserError(str(e)) from None
    except (TypeError, KeyError) as e:
        raise UserError(f"{run_json}: scoring.price: not a price record ({e})") from None


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="flarebench", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        help="run strategies on a probe set and write a run folder",
        description="Run strategies on a probe set; the options are those of `pytest bench`.",
    )
    for opt in RUN_OPTIONS:
        run.add_argument(opt.flag, **opt.argparse_kwargs())
    run.set_defaults(func=_run)
    score = sub.add_parser(
        "score",
        help="recompute a run's metrics from its traces.jsonl",
        description="Recompute summary.csv and summary.md of RUN_DIR from traces.jsonl, without generating.",
    )
    score.add_argument("run_dir", metavar="RUN_DIR")
    score.add_argument(
        "--by",
        action="append",
        metavar="FIELD",
        help="also break the results down by a probe metadata field (e.g. difficulty, hops); "
        "writes breakdown_FIELD.csv; repeatable",
    )
    for opt in RUN_OPTIONS:
        if opt.flag in ("--judge", "--judge-base-url"):
            score.add_argument(opt.flag, **opt.argparse_kwargs())
    score.add_argument(
        "--prices",
        metavar="FILE",
        help="price cost_per_q with this price table (default: the prices the run recorded in run.json)",
    )
    score.add_argument(
        "--reference",
        metavar="SPEC",
        help="the delta columns' reference strategy (default: the run's, else single_time)",
    )
    score.set_defaults(func=_score)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except UserError as e:
        print(f"flarebench: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("flarebench: interrupted; finished probes are kept, run the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
