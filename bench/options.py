"""The run options, defined once for the pytest plugin and the ``flarebench`` console script, so
every option has the same name, default and help in both. A project's config file
(:mod:`flarebench.bench.settings`) sets their defaults under the same names."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

#: Said under the options in both --help texts: where their defaults can be set.
DEFAULTS_NOTE = (
    "The defaults of the options `run` takes can be set in flarebench.toml or in [tool.flarebench] of "
    "pyproject.toml (the nearest from the current folder upwards), under their names without --; the command "
    "line wins, and --no-NAME (--no-gate, --no-cache, ...) sets NAME back to its built-in default. A command's "
    "own options (--budget, --target, --param, --values) go on its command line."
)

# The defaults of calibrate's and compare --budget's --dev-fraction and --budget-tolerance (here, not
# in calibrate.py, so that --help need not import pandas).
#: The dev share of the probes when not told otherwise.
DEV_FRACTION = 0.3
#: How far a realised test figure may sit from the target (or beyond the budget) before the
#: report says the strategy missed it.
TOLERANCE = 0.1


def is_blank(value: Any) -> bool:
    """Whether ``value`` is text of nothing but whitespace (``--report-dir ' '`` made a folder named
    by a space)."""
    return isinstance(value, str) and not value.strip()


class Parser(argparse.ArgumentParser):
    """An argument parser whose mistakes are one line (``flarebench run: error: argument --limit:
    invalid int value: 'abc'; see flarebench run --help``), not a usage block of twenty, and which
    refuses an empty value given to any option (``--reference ''`` meant the default, silently).
    Its subcommands' parsers are of the same class."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}; see {self.prog} --help\n")

    def parse_known_args(self, args=None, namespace=None):
        parsed, unknown = super().parse_known_args(args, namespace)
        for action in self._actions:
            value = getattr(parsed, action.dest, None)
            if is_blank(value) or (isinstance(value, list) and any(is_blank(v) for v in value)):
                name = action.option_strings[0] if action.option_strings else action.metavar or action.dest
                self.error(f"argument {name}: must not be empty")
        return parsed, unknown


@dataclass(frozen=True)
class Option:
    """One run option: ``--flag`` with its help text and default."""

    flag: str
    help: str
    default: Any = None
    repeatable: bool = False
    is_switch: bool = False
    type: type = str
    metavar: str | None = None
    #: The value of a flag given without one (``--cache`` alone); None: the flag needs a value.
    const: Any = None

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def negation(self) -> str:
        """``--no-NAME``: the built-in default, whatever the config file sets (``--no-gate``)."""
        return f"--no-{self.flag.removeprefix('--')}"

    @property
    def negated_dest(self) -> str:
        return f"no_{self.dest}"

    def negation_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for the ``--no-NAME`` flag; left out of --help, which says it once
        (:data:`DEFAULTS_NOTE`)."""
        return {"action": "store_true", "default": None, "dest": self.negated_dest, "help": argparse.SUPPRESS}

    def argparse_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``parser.add_argument`` / pytest's ``group.addoption``. The parsed
        value is None when the flag is not given: the config file, then :attr:`default`, fill it in
        (:func:`flarebench.bench.settings.resolve`)."""
        if self.is_switch:
            return {"action": "store_true", "default": None, "help": self.help, "dest": self.dest}
        kw: dict[str, Any] = {"help": self.help, "default": None, "dest": self.dest, "metavar": self.metavar}
        if self.repeatable:
            kw["action"] = "append"
        if self.const is not None:
            kw.update(nargs="?", const=self.const)
        if self.type is not str:
            kw["type"] = self.type
        return kw


#: --plugin, which every flarebench command takes (not only the run commands).
PLUGIN = Option(
    "--plugin",
    "import a plugin for this run: a module name or a FILE.py whose @register (strategies), @register_lm, "
    "@register_retriever and @trigger classes and @scorer functions become available by name; repeatable "
    "(installed plugins' entry points need none)",
    repeatable=True,
    metavar="MODULE|FILE.py",
)

RUN_OPTIONS: tuple[Option, ...] = (
    PLUGIN,
    Option(
        "--strategy",
        "strategy spec: NAME or NAME:key=value,...; repeat for several; 'all' = every "
        "built-in strategy with default parameters (not http; a plugin's only when named) (default: all)",
        repeatable=True,
        metavar="SPEC",
    ),
    Option(
        "--probes",
        "probe set: a shipped name (see `python -m flarebench.probes list`), a folder in the probe format, or "
        "an official HotpotQA, 2WikiMultihopQA, ASQA or StrategyQA JSON file (see --probes-format); a shipped "
        "name wins over a folder of that name, ./NAME is the folder (default: phantomwiki)",
        default="phantomwiki",
        metavar="NAME|PATH",
    ),
    Option(
        "--probes-format",
        "how to read --probes: auto (a folder is a flarebench probe set, a JSON file is detected by "
        "its shape), flarebench, hotpotqa, 2wiki, asqa or strategyqa (default: auto)",
        default="auto",
        metavar="FORMAT",
    ),
    Option("--limit", "run only the first N probes of the set", type=int, metavar="N"),
    Option(
        "--lm",
        "LM backend: llamacpp:smollm2 (bundled), llamacpp:gemma3-270m, llamacpp:PATH.gguf, or openai:MODEL "
        "on an OpenAI-compatible endpoint (see --lm-base-url, --lm-api-key-env), or a plugin's NAME[:ARG] "
        "(@register_lm; see --plugin) (default: llamacpp:smollm2)",
        default="llamacpp:smollm2",
        metavar="SPEC",
    ),
    Option(
        "--lm-base-url",
        "base URL of the endpoint of --lm openai:MODEL, e.g. http://127.0.0.1:8000/v1 "
        "(default: $OPENAI_BASE_URL, else https://api.openai.com/v1)",
        metavar="URL",
    ),
    Option(
        "--lm-api-key-env",
        "name of the environment variable that holds the API key of --lm openai:MODEL, so that no key is "
        "ever typed on a command line; the key is never recorded (default: OPENAI_API_KEY; a local server needs none)",
        metavar="VAR",
    ),
    Option(
        "--lm-timeout",
        "seconds --lm openai:MODEL waits for one response before retrying (default: 300)",
        type=float,
        metavar="SECONDS",
    ),
    Option(
        "--lm-retries",
        "retries of one --lm openai:MODEL request on a timeout, connection error, 408, 409, 429 or 5xx, with "
        "exponential backoff (0.5, 1, 2, 4 s for the default 4, at most 8 s each, with jitter); after them the run "
        "stops and can be resumed (default: 4)",
        type=int,
        metavar="N",
    ),
    Option(
        "--concurrency",
        "probes run at once (threads), to keep a served model busy; above 1 only with --lm openai:MODEL (default: 1)",
        default=1,
        type=int,
        metavar="N",
    ),
    Option(
        "--executor",
        "where probes run: local (this process) or ray (Ray actors, each with its own backends; install the ray "
        "extra; see --ray-address, --workers, --threads-per-worker) (default: local)",
        default="local",
        metavar="local|ray",
    ),
    Option(
        "--ray-address",
        "with --executor ray: the Ray cluster to run on, e.g. 10.0.0.5:6379 or auto "
        "(default: start a local Ray instance)",
        metavar="ADDRESS",
    ),
    Option(
        "--workers",
        "with --executor ray: Ray actors running probes, each building the LM and retriever once (default: 2)",
        type=int,
        metavar="N",
    ),
    Option(
        "--threads-per-worker",
        "with --executor ray: CPU threads of each worker's in-process model, and the CPUs it reserves "
        "(default: the model's 2 threads, or $FLAREBENCH_LM_THREADS, with 1 CPU reserved)",
        type=int,
        metavar="N",
    ),
    Option(
        "--retriever",
        "retriever backend: bm25s (embedded BM25), pyserini (real Lucene BM25 through Anserini; extra lucene, "
        "see README), dense (cosine over --embed's vectors), hybrid (bm25s and dense fused by reciprocal rank; "
        "hybrid:rrf_k=60,bm25_weight=1,dense_weight=1,depth=20) or http:URL (your own search service: each search "
        "POSTed to URL as JSON, see README), or a plugin's NAME (@register_retriever; see --plugin) (default: bm25s)",
        default="bm25s",
        metavar="SPEC",
    ),
    Option(
        "--retriever-timeout",
        "seconds --retriever http:URL waits for one search before retrying (default: 300)",
        type=float,
        metavar="SECONDS",
    ),
    Option(
        "--retriever-retries",
        "retries of one --retriever http:URL search on a timeout, connection error, 408, 409, 429 or 5xx, with "
        "exponential backoff; after them the run stops and can be resumed (default: 4)",
        type=int,
        metavar="N",
    ),
    Option(
        "--embed",
        "embedding model of --retriever dense or hybrid: openai:MODEL on an OpenAI-compatible /embeddings "
        "endpoint (see --embed-base-url); the corpus is embedded once and its vectors cached",
        metavar="SPEC",
    ),
    Option(
        "--embed-base-url",
        "base URL of the --embed and --rerank openai:MODEL endpoint, e.g. http://127.0.0.1:8001/v1 "
        "(default: $OPENAI_BASE_URL, else https://api.openai.com/v1)",
        metavar="URL",
    ),
    Option(
        "--embed-api-key-env",
        "name of the environment variable holding the key of --embed-base-url's endpoint; never recorded "
        "(default: OPENAI_API_KEY; a local server needs none)",
        metavar="VAR",
    ),
    Option(
        "--rerank",
        "rerank the retriever's top --rerank-depth passages and keep k: lm (the run's LM scores each passage; "
        "its calls count as the strategy's, purpose rerank) or openai:MODEL (the /rerank endpoint at "
        "--embed-base-url) (default: none)",
        metavar="SPEC",
    ),
    Option(
        "--rerank-depth",
        "passages the retriever returns for --rerank to order, at least the strategy's k (default: 20)",
        type=int,
        metavar="N",
    ),
    Option(
        "--report-dir",
        "the run folder (summary.csv, summary.md, run.json, traces.jsonl); a folder "
        "holding a run of the same configuration is resumed (default: reports/<UTC time>-<config hash>/, or the "
        "newest such folder when its run did not finish)",
        metavar="DIR",
    ),
    Option(
        "--overwrite",
        "replace a run folder that holds a run of a different configuration (its run's files only: "
        "a folder that holds no run is never emptied)",
        is_switch=True,
    ),
    Option(
        "--retry-errors",
        "run again the probes of a resumed run whose traces hold an error (a server's 500 after the retries, a "
        "malformed reply), replacing those traces; without --report-dir, the newest run folder of this configuration, "
        "finished or not, when it holds one",
        is_switch=True,
    ),
    Option(
        "--save-baseline",
        "write the run's metrics, configuration and tolerances to FILE as a regression baseline "
        "(only when every strategy ran without errors)",
        metavar="FILE",
    ),
    Option(
        "--gate",
        "compare the run with the baseline FILE: a strategy whose metrics break a tolerance fails "
        "(no --strategy: the baseline's strategies)",
        metavar="FILE",
    ),
    Option(
        "--tolerance",
        "override one metric's bound for --gate/--save-baseline: METRIC=KIND:VALUE (KIND max_drop, "
        "max_drop_rel, max_rise, max_rise_rel), METRIC=VALUE (keep the kind) or METRIC=off; repeatable",
        repeatable=True,
        metavar="METRIC=SPEC",
    ),
    Option(
        "--gate-across-configs",
        "with --gate, compare even when the run's configuration differs from the baseline's; a spec "
        "whose parameters changed is gated against the baseline's spec of the same strategy",
        is_switch=True,
    ),
    Option(
        "--prices",
        "price table FILE (TOML, the shape of bench/prices.toml) for cost_per_q; its entries are looked "
        "up before the shipped table's (default: the shipped table; llamacpp:* models cost 0)",
        metavar="FILE",
    ),
    Option(
        "--reference",
        "the strategy spec the em/f1 delta columns (paired bootstrap intervals) compare every strategy "
        "with; one given that is not in the run is refused before it runs, the default leaves the delta "
        "columns empty (default: single_time)",
        default="single_time",
        metavar="SPEC",
    ),
    Option(
        "--judge",
        "judge LM for faithfulness: openai:MODEL on any OpenAI-compatible endpoint, scored with ragas's "
        "faithfulness metric; the key comes from JUDGE_API_KEY (else OPENAI_API_KEY) and is never recorded "
        "(default: none, the offline lexical-slots score; `score` and `report` reuse a judge the run recorded "
        "unless given --judge none)",
        metavar="SPEC",
    ),
    Option(
        "--judge-base-url",
        "the judge's base URL, e.g. http://127.0.0.1:8000/v1 (default: $JUDGE_BASE_URL, else the openai client's own)",
        metavar="URL",
    ),
    Option(
        "--cache",
        "serve LM calls and retrievals from an on-disk cache in DIR (default DIR: $FLAREBENCH_CACHE/calls, "
        "else ~/.cache/flarebench/calls) and add new ones to it; keyed by everything that determines them; "
        "hits are marked and their latency reported apart (default: off, so latency is real)",
        const="default",
        metavar="DIR",
    ),
    Option(
        "--record-topk",
        "every draft call (flare_direct, adaptive) also records the K most likely tokens at each position "
        "(1 to 20) and the entropy, so that `flarebench score` reports every probability trigger's AUROC and "
        "retrieval rate over a threshold grid from this one run; answers do not change; part of the "
        "configuration (default: off)",
        type=int,
        metavar="K",
    ),
)
