"""flarebench.bench.prices: the shipped table, a user's table, lookup rules and refusals."""

from __future__ import annotations

import pytest

from flarebench.bench.prices import SHIPPED, Price, PriceError, load_table, price_for


def test_shipped_table_prices_local_models_at_zero():
    assert "llamacpp:*" in load_table(SHIPPED)
    p = price_for("llamacpp:smollm2")
    assert p is not None and p.local and p.cost(1e6, 1e6, 10) == 0.0
    assert "local model llamacpp:smollm2: priced at 0" in p.note()
    assert price_for("llamacpp:/models/x.gguf").local
    assert price_for("openai:some-model") is None  # no entry: no price, not 0


def test_shipped_table_is_package_data():
    import tomllib
    from importlib import resources

    text = resources.files("bench").joinpath("prices.toml").read_text(encoding="utf-8")
    assert tomllib.loads(text)["models"]["llamacpp:*"]["local"] is True


def test_user_table_first_exact_before_pattern(tmp_path):
    f = tmp_path / "prices.toml"
    f.write_text(
        '[models."openai:*"]\nprompt_per_1m = 1.0\ncompletion_per_1m = 2.0\n'
        '[models."openai:big"]\nprompt_per_1m = 5.0\ncompletion_per_1m = 15.0\nper_retrieval = 0.002\n'
        '[models."llamacpp:smollm2"]\nprompt_per_1m = 0.1\ncompletion_per_1m = 0.1\n'
    )
    big = price_for("openai:big", f)
    assert (big.prompt_per_1m, big.completion_per_1m, big.per_retrieval, big.matched) == (
        5.0,
        15.0,
        0.002,
        "openai:big",
    )
    # 1,000 prompt tokens sent, 100 generated, 2 retrievals
    assert big.cost(1000, 100, 2) == pytest.approx(1000 * 5 / 1e6 + 100 * 15 / 1e6 + 2 * 0.002)
    assert price_for("openai:small", f).matched == "openai:*"
    # the user's entry wins over the shipped pattern
    mine = price_for("llamacpp:smollm2", f)
    assert mine.prompt_per_1m == 0.1 and not mine.local and "priced at 0.1 USD per 1M prompt tokens sent" in mine.note()
    assert Price.from_record(big.record()) == big


@pytest.mark.parametrize(
    "text, message",
    [
        ("x = 1", ': expected [models."NAME"] tables'),
        ('[models."m"]\nprompt_per_1m = 1.0', ":1: models.m: completion_per_1m missing"),
        (
            '[models."m"]\nprompt_per_1m = -1\ncompletion_per_1m = 1',
            ":2: models.m.prompt_per_1m: expected a number >= 0",
        ),
        (
            '[models."m"]\nprompt_per_1m = "cheap"\ncompletion_per_1m = 1',
            ":2: models.m.prompt_per_1m: expected a number",
        ),
        (
            '[models."m"]\nprompt_per_1m = 1\ncompletion_per_1m = 1\nper_token = 2',
            ":4: models.m.per_token: unknown field(s)",
        ),
        # The line is the field's in its own model's table, not the same field in a table before it.
        (
            '[models."a"]\nprompt_per_1m = 1\ncompletion_per_1m = 1\nlocal = true\n\n'
            '[models."m"]\nprompt_per_1m = 1\ncompletion_per_1m = 1\nlocal = "yes"',
            ":9: models.m.local: expected true or false",
        ),
        ('models = { "m" = { prompt_per_1m = 1, completion_per_1m = -2 } }', ":1: models.m.completion_per_1m"),
        ("[models", ": not a price table"),
    ],
)
def test_bad_price_files_are_one_line_errors(tmp_path, text, message):
    f = tmp_path / "p.toml"
    f.write_text(text)
    with pytest.raises(PriceError) as e:
        load_table(f)
    assert str(e.value).startswith(f"{f}{message}") and "\n" not in str(e.value), str(e.value)
    with pytest.raises(PriceError, match="not found"):
        load_table(tmp_path / "none.toml")


def test_a_price_table_an_editor_began_with_a_byte_order_mark_is_read(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text('[models."m"]\nprompt_per_1m = 1\ncompletion_per_1m = 2\n', encoding="utf-8-sig")
    assert load_table(f)["m"]["completion_per_1m"] == 2
