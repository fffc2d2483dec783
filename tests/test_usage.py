"""An option a command does not take, or a value it cannot take, is refused in one line naming the
command (not the top level, which lists only the commands) and the option it was probably meant to be."""

from __future__ import annotations

import pytest

from flarebench.bench.cli import main


@pytest.mark.parametrize(
    "argv, said",
    [
        (["run", "--limt", "3"], "flarebench run: error: unrecognized arguments: --limt 3 (did you mean --limit?)"),
        (
            ["score", "r", "--refrence=x"],
            "flarebench score: error: unrecognized arguments: --refrence=x (did you mean --reference?)",
        ),
        (
            ["sweep", "--param", "theta", "--values", "0.2,0.5"],
            "flarebench sweep: error: unrecognized arguments: --values 0.2,0.5 (sweep takes its values in "
            "--param NAME=V1,V2,...; --param NAME --values V1,V2 is calibrate's)",
        ),
        (["run", "extra"], "flarebench run: error: unrecognized arguments: extra"),
        (
            ["sweep", "--param", "theta=0.2,0.5", "--budget", "retrieval_rate=0.5"],
            "flarebench sweep: error: unrecognized arguments: --budget retrieval_rate=0.5 (--budget is an option "
            "of calibrate, compare)",
        ),
    ],
)
def test_an_unknown_option_is_said_with_the_commands_usage(capsys, argv, said):
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    # One line, the command's own name and --help, not a usage block of twenty lines.
    assert e.value.code == 2 and err == f"{said}; see flarebench {argv[0]} --help\n", err


@pytest.mark.parametrize(
    "argv, said",
    [
        (["run", "--limit", "abc"], "flarebench run: error: argument --limit: invalid int value: 'abc'"),
        (["score", "r", "--prices", ""], "flarebench score: error: argument --prices: must not be empty"),
        (["score", "r", "--reference", ""], "flarebench score: error: argument --reference: must not be empty"),
        (["compare", "--budget", ""], "flarebench compare: error: argument --budget: must not be empty"),
        (["agreement", "--claims", ""], "flarebench agreement: error: argument --claims: must not be empty"),
        (["init", ""], "flarebench init: error: argument DIR: must not be empty"),
        (["run", "--lm-base-url", ""], "flarebench run: error: argument --lm-base-url: must not be empty"),
        (["run", "--report-dir", " "], "flarebench run: error: argument --report-dir: must not be empty"),
    ],
)
def test_a_value_of_the_wrong_kind_or_empty_is_one_line(capsys, argv, said):
    # An empty value meant the default or the current folder, silently (init '' wrote into it).
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and capsys.readouterr().err == f"{said}; see flarebench {argv[0]} --help\n"
