"""The strategy registry and spec parsing."""

import dataclasses
import re
from pathlib import Path
from typing import ClassVar, Literal

import pytest

from flarebench.strategies import expand, get, names, parse_spec, register
from flarebench.strategies.base import Strategy
from flarebench.strategies.registry import SpecError


def test_builtin_strategies_are_registered():
    from flarebench.strategies.registry import BUILTIN

    assert {"no_retrieval", "single_time", "adaptive"} <= set(names())
    assert set(BUILTIN) <= set(names())
    # BUILTIN's rules (its comment): simplest first, each name once and the module registering it.
    # Where a new strategy goes among the others (after those it builds on) is the author's call.
    assert BUILTIN[0] == "no_retrieval" and len(set(BUILTIN)) == len(BUILTIN)
    assert [get(n).__module__ for n in BUILTIN] == [f"flarebench.strategies.{n}" for n in BUILTIN]
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
    # The same spec written with a trailing colon or spaces is one row, not two.
    same = ["flare_direct", "flare_direct:", " flare_direct : ", "flare_direct:,"]
    assert expand(same) == ["flare_direct"]
    assert expand(["single_time:k=5", "single_time: k = 5 ,", "single_time:k=5,,"]) == ["single_time:k=5"]


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


def test_a_subclass_that_is_no_dataclass_itself_is_refused_naming_its_fields(isolated_registry):
    from flarebench.strategies.plugins import PluginError

    class Inherits(Strategy):  # a dataclass only through Strategy: theta would be no parameter
        theta: float = 0.5

        def run(self, question, lm, retriever):  # pragma: no cover - never run
            raise NotImplementedError

    with pytest.raises(PluginError) as e:
        register("_test_inherits")(Inherits)
    assert re.fullmatch(
        r"strategy '_test_inherits': \S*Inherits must be a dataclass itself \(@dataclass under @register\), "
        r"else its fields are no parameters: theta",
        str(e.value),
    )
    assert "_test_inherits" not in names()

    class MethodsOnly(Strategy):  # declares no field: every parameter is Strategy's, as given
        label: ClassVar[str] = "mine"

        def run(self, question, lm, retriever):  # pragma: no cover - never run
            raise NotImplementedError

    register("_test_methods_only")(MethodsOnly)
    assert parse_spec("_test_methods_only:k=5").params() == {"k": 5, "max_tokens": 128, "answer_form": "short"}


@pytest.mark.parametrize(
    ("annotation", "shown"),
    [
        (list[str], "list[str]"),
        (int | str, "int | str"),
        (int | str | None, "int | str | None"),
        (Literal[1, 2], "typing.Literal[1, 2]"),
        (dict, "dict"),
        (Path, "Path"),
    ],
)
def test_a_parameter_a_spec_cannot_set_is_refused_when_registered(isolated_registry, annotation, shown):
    # _convert would call list[str]("abc") (['a', 'b', 'c']) or read "3" as the first type of a union.
    from flarebench.strategies.plugins import PluginError

    namespace = {"__annotations__": {"words": annotation}, "words": None, "run": lambda self, q, lm, r: None}
    cls = dataclasses.dataclass(type("Odd", (Strategy,), namespace))
    with pytest.raises(PluginError) as e:
        register("_test_odd")(cls)
    assert str(e.value) == (
        f"strategy '_test_odd': Odd.words: a spec cannot set a parameter of type {shown} "
        "(bool, int, float, str, a Literal of strings, or one of them | None)"
    )
    assert "_test_odd" not in names()


def test_every_type_a_spec_can_set_is_accepted(isolated_registry):
    from typing import Literal, Optional

    @register("_test_types")
    @dataclasses.dataclass
    class Types(Strategy):
        flag: bool | None = None
        mode: Literal["a", "b"] | None = None
        ratio: Optional[float] = None  # noqa: UP045 (the older spelling is accepted too)
        label: str = ""

        def run(self, question, lm, retriever):  # pragma: no cover - never run
            raise NotImplementedError

    t = parse_spec("_test_types:flag=yes,mode=none,ratio=0.5,label=x")
    assert (t.flag, t.mode, t.ratio, t.label) == (True, None, 0.5, "x")


@pytest.mark.parametrize(
    ("check", "message"),
    [
        ("assert self.theta <= 1, 'theta must be <= 1'", "theta must be <= 1"),
        ("assert self.theta <= 1", "Checked refused it (AssertionError)"),
        ("if self.theta > 1: raise TypeError('theta must be a number <= 1')", "theta must be a number <= 1"),
    ],
)
def test_a_validate_that_asserts_or_raises_type_error_is_a_spec_error(isolated_registry, check, message):
    namespace: dict = {}
    exec(f"def validate(self):\n    {check}\n", namespace)
    body = {"__annotations__": {"theta": float}, "theta": 0.5, "validate": namespace["validate"], "run": lambda *a: 0}
    register("_test_checked")(dataclasses.dataclass(type("Checked", (Strategy,), body)))
    assert parse_spec("_test_checked:theta=1").theta == 1
    with pytest.raises(SpecError) as e:
        parse_spec("_test_checked:theta=2")
    assert str(e.value) == f"_test_checked:theta=2: {message}"


@pytest.mark.parametrize(
    ("method", "body", "message"),
    [
        ("validate", "raise RuntimeError('bad config')", "Broken() raised RuntimeError: bad config"),
        ("needs", "raise KeyError('x')", "Broken.needs() raised KeyError: 'x'"),
        ("static_prompts", "raise OSError('gone')", "Broken.static_prompts() raised OSError: gone"),
        ("request_shape", "return {'x': object()}", "Broken.request_shape() raised TypeError: Object of type object"),
    ],
)
def test_a_plugins_method_that_raises_is_a_spec_error_in_one_line(isolated_registry, method, body, message):
    # Anything else a plugin's method raises was a traceback (an INTERNALERROR under pytest bench).
    namespace: dict = {}
    exec(f"def {method}(self):\n    {body}\n", namespace)
    register("_test_broken")(
        dataclasses.dataclass(type("Broken", (Strategy,), {method: namespace[method], "run": None}))
    )
    with pytest.raises(SpecError) as e:
        parse_spec("_test_broken")
    assert str(e.value).startswith(f"_test_broken: {message}")


def test_a_parameter_the_spec_must_set_and_does_not_is_a_spec_error(isolated_registry):
    @register("_test_required")
    @dataclasses.dataclass
    class Required(Strategy):
        url: str = dataclasses.field(kw_only=True)

        def run(self, question, lm, retriever):  # pragma: no cover - never run
            raise NotImplementedError

    with pytest.raises(SpecError, match=r"^_test_required: .*missing 1 required keyword-only argument: 'url'$"):
        parse_spec("_test_required")
    assert parse_spec("_test_required:url=x").url == "x"


def test_a_type_imported_only_for_type_checking_is_refused_when_registered(isolated_registry):
    from flarebench.strategies.plugins import PluginError

    # As `from __future__ import annotations` leaves it: a string naming what only a type checker imports.
    # (__module__: the namespace the string is read in; type() would take abc's, ABCMeta's own.)
    run, module = (lambda self, q, lm, r: None), __name__
    body = {"__module__": module, "__annotations__": {"mode": "Mode | None"}, "mode": None, "run": run}
    with pytest.raises(PluginError) as e:
        register("_test_tc")(dataclasses.dataclass(type("Checked", (Strategy,), body)))
    assert str(e.value) == (
        "strategy '_test_tc': Checked.mode: its type 'Mode | None' cannot be resolved at run time "
        "(NameError: name 'Mode' is not defined); import what it names outside `if TYPE_CHECKING:`"
    )
    # An annotation that is no parameter's is never evaluated: the strategy registers and parses.
    body = {"__module__": module, "__annotations__": {"helper": "ClassVar[Mode]"}, "helper": None, "run": run}
    register("_test_tc_classvar")(dataclasses.dataclass(type("Helper", (Strategy,), body)))
    assert parse_spec("_test_tc_classvar:k=2").k == 2


@pytest.mark.parametrize(
    ("needs", "message"),
    [
        (
            frozenset({"logprob", "tools"}),
            "names unknown capability 'logprob'; known: logprobs, top_logprobs, logit_bias, tools, chat",
        ),
        ("logprobs", "must return a set of capability names, got 'logprobs'; known: logprobs, top_logprobs, "),
    ],
)
def test_needs_naming_no_capability_is_a_spec_error_naming_the_known_ones(isolated_registry, needs, message):
    # The run's refusal would name the missing capabilities in words: a misspelt one has none ("needs , which").
    body = {"needs": lambda self: needs, "run": lambda self, q, lm, r: None}
    register("_test_needs")(dataclasses.dataclass(type("Needy", (Strategy,), body)))
    with pytest.raises(SpecError) as e:
        parse_spec("_test_needs:k=2")
    assert str(e.value).startswith(f"_test_needs:k=2: Needy.needs() {message}")
    assert "\n" not in str(e.value)


def test_a_misspelt_strategy_is_offered_the_name_it_is_near():
    with pytest.raises(SpecError, match=r"^unknown strategy 'flare_drect'; did you mean 'flare_direct'\? known: "):
        parse_spec("flare_drect:theta=0.5")
    with pytest.raises(SpecError) as far:
        parse_spec("flair")
    assert "did you mean" not in str(far.value)
