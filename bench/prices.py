"""Token prices: the shipped price table (``bench/prices.toml``), a user's table (``--prices FILE``),
and the cost of a question.

Cost of one question = prompt tokens sent x prompt price + completion tokens x completion price
(both per 1M tokens) + retriever calls x price per retrieval. Prompt tokens are counted as SENT,
not as evaluated: a hosted API bills every token it receives, whatever its prefix cache reuses.
"""

from __future__ import annotations

import fnmatch
import math
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from flarebench.bench.lines import line_of
from flarebench.strategies.records import FLAG, NUMBER, TEXT, check_fields

#: The table shipped with flarebench (edit it, or pass your own with --prices).
SHIPPED = Path(__file__).with_name("prices.toml")

_FIELDS = ("prompt_per_1m", "completion_per_1m", "per_retrieval")


class PriceError(ValueError):
    """A bad price file: one line naming the file and the field."""


@dataclass(frozen=True)
class Price:
    """The prices applied to one model, and where they came from."""

    model: str
    prompt_per_1m: float
    completion_per_1m: float
    per_retrieval: float = 0.0
    local: bool = False
    matched: str = ""  # the table entry (name or pattern) that priced the model
    source: str = ""  # the file that entry came from

    def cost(self, prompt_tokens: float, completion_tokens: float, retrievals: float = 0.0) -> float:
        """USD for the given token and retrieval counts."""
        return (
            prompt_tokens * self.prompt_per_1m / 1e6
            + completion_tokens * self.completion_per_1m / 1e6
            + retrievals * self.per_retrieval
        )

    def note(self) -> str:
        """One line for the report: how cost_per_q was priced."""
        if self.local and not (self.prompt_per_1m or self.completion_per_1m or self.per_retrieval):
            return f"cost_per_q: local model {self.model}: priced at 0 (entry {self.matched!r} of {self.source})"
        return (
            f"cost_per_q: {self.model} priced at {self.prompt_per_1m:g} USD per 1M prompt tokens sent, "
            f"{self.completion_per_1m:g} per 1M completion tokens, {self.per_retrieval:g} per retrieval "
            f"(entry {self.matched!r} of {self.source})"
        )

    def record(self) -> dict[str, Any]:
        """What run.json records (outside ``config``: prices do not change answers)."""
        return asdict(self)

    @classmethod
    def from_record(cls, d: Any, where: str = "price") -> Price:
        """A Price from what run.json recorded (:meth:`record`); ValueError names a field that is
        missing or not of its kind by its path (``where``: the record's own, e.g. ``scoring.price``)."""
        check_fields(d, _RECORD_FIELDS, where, required=("model", "prompt_per_1m", "completion_per_1m"))
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


#: The kinds of the fields of a recorded Price (:meth:`Price.record`).
_RECORD_FIELDS = {
    "model": TEXT,
    **dict.fromkeys(_FIELDS, NUMBER),
    "local": FLAG,
    "matched": TEXT,
    "source": TEXT,
}


def load_table(path: str | Path) -> dict[str, dict[str, Any]]:
    """Read and check a price file; returns ``{name or pattern: entry}`` in file order. A bad
    entry is one PriceError line naming the file, the line and the field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # an editor's byte-order mark is no TOML statement
        data = tomllib.loads(text)
    except FileNotFoundError:
        raise PriceError(f"{path}: price file not found") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise PriceError(f"{path}: not a price table ({e})") from None

    def bad(keys: tuple[str, ...], what: str) -> PriceError:
        return PriceError(f"{path}:{line_of(text, *keys)}: {'.'.join(keys)}: {what}")

    models = data.get("models")
    if not isinstance(models, dict):
        raise PriceError(f'{path}: expected [models."NAME"] tables')
    out: dict[str, dict[str, Any]] = {}
    for name, entry in models.items():
        where = ("models", name)
        if not isinstance(entry, dict):
            raise bad(where, "expected a table of prices")
        unknown = sorted(set(entry) - {*_FIELDS, "local"})
        if unknown:
            raise bad(
                (*where, unknown[0]),
                f"unknown field(s) {', '.join(unknown)}; fields: {', '.join(_FIELDS)}, local",
            )
        for required in ("prompt_per_1m", "completion_per_1m"):
            if required not in entry:
                raise bad(where, f"{required} missing")
        for f in _FIELDS:
            value = entry.get(f, 0.0)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise bad((*where, f), f"expected a number >= 0, got {value!r}")
        clean = {f: float(entry.get(f, 0.0)) for f in _FIELDS}
        local = entry.get("local", False)
        if not isinstance(local, bool):
            raise bad((*where, "local"), f"expected true or false, got {local!r}")
        out[name] = {**clean, "local": local}
    return out


def _lookup(table: dict[str, dict[str, Any]], model: str) -> str | None:
    if model in table:
        return model
    return next((pattern for pattern in table if fnmatch.fnmatchcase(model, pattern)), None)


def price_for(model: str, user_file: str | Path | None = None) -> Price | None:
    """The price of ``model``: from ``user_file`` first (when given), then the shipped table.
    None when neither has an entry (the summary then leaves cost_per_q empty)."""
    tables = ([(str(user_file), load_table(user_file))] if user_file else []) + [
        ("bench/prices.toml (shipped)", load_table(SHIPPED))
    ]
    for source, table in tables:
        key = _lookup(table, model)
        if key is not None:
            entry = table[key]
            return Price(model=model, matched=key, source=source, **entry)
    return None
