"""The strategy registry and spec parsing."""

import dataclasses

import pytest

from flarebench.strategies import expand, get, names, parse_spec, register
from flarebench.strategies.base import Strategy
from flarebench.strategies.registry import SpecError


def test_builtin_strategies_are_registered():
    from flarebench.strategies.registry import BUILTIN

    assert {"no_retrieval", "single_time", "adaptive"} <= set(names())
    assert set(BUILTIN) <= set(names()) and BUILTIN[-1] == "tool_search"
    assert get("single_time").name == "single_time"


@pytest.mark.parametrize("given", ["flare_instruct:search_bias", "flare_direct:theta", "http:url=http://h/a,timeout"])
@pytest.mark.parametrize("value", ["inf", "1e309", "nan"])
def test_a_float_parameter_that_is_not_a_finite_number_is_refused(given, value):
    # A range check such as x >= 0 lets inf through, and json would write it as Infinity (not JSON).
    key = given.rpartition(",")[2].rpartition(":")[2]
    with pytest.raises(SpecError, match=rf"^{given}={value}: {key} must be a finite number, got '{value}'$"):
        parse_spec(f"{given}={value}")


def test_unknown_name_lists_known_names():
    with pytest.raises(SpecError) as e:
        get("flair")
    assert "unknown strategy 'flair'" in str(e.value)
    for name in names():
        assert name in str(e.value)


def test_spec_parameters_are_typed_and_validated():
    s = parse_spec("single_time:k=5,max_tokens=64")
    assert (s.k, s.max_tokens) == (5, 64)
    assert s.params() == {"k": 5, "max_tokens": 64, "answer_form": "short"}
    with pytest.raises(SpecError, match="k must be int, got 'x'"):
        parse_spec("single_time:k=x")
    with pytest.raises(SpecError, match="k must be >= 1"):
        parse_spec("single_time:k=0")
    with pytest.raises(SpecError, match="no parameter 'kk'; parameters: k, max_tokens, answer_form"):
        parse_spec("single_time:kk=3")
    with pytest.raises(SpecError, match="no parameter 'thetta'; did you mean 'theta'\\? parameters: k, "):
        parse_spec("flare_direct:thetta=0.5")
    with pytest.raises(SpecError, match="expected key=value"):
        parse_spec("single_time:k")
    with pytest.raises(SpecError, match="given twice"):
        parse_spec("single_time:k=1,k=2")


def test_expand_all_and_default():
    from flarebench.strategies.registry import BUILTIN

    assert expand(None) == list(BUILTIN)
    assert expand(["all"]) == list(BUILTIN)
    assert expand(["single_time", "single_time:k=5", "single_time"]) == ["single_time", "single_time:k=5"]


def test_register_decorator_and_conversions(isolated_registry):
    from typing import Literal

    @register("_test_toy")
    @dataclasses.dataclass
    class Toy(Strategy):
        theta: float = 0.8
        on: bool = True
        mode: Literal["a", "b"] = "a"
        cap: int | None = None

        def run(self, question, lm, retriever):  # pragma: no cover - never run
            raise NotImplementedError

    t = parse_spec("_test_toy:theta=0.25,on=off,mode=b,cap=none")
    assert (t.theta, t.on, t.mode, t.cap) == (0.25, False, "b", None)
    assert parse_spec("_test_toy:cap=4").cap == 4
    with pytest.raises(SpecError, match="mode must be one of a, b"):
        parse_spec("_test_toy:mode=c")
    with pytest.raises(ValueError, match="already registered"):
        register("_test_toy")(type("Other", (Toy,), {}))


def test_a_toy_strategy_registered_by_a_test_is_gone_afterwards():
    # test_register_decorator_and_conversions ran first (file order) with the isolated registry.
    assert "_test_toy" not in names()
