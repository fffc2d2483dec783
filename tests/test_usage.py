"""An option a command does not take is refused with that command's usage, naming the option it was
probably meant to be, not with the top-level usage that lists only the commands."""

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
    assert e.value.code == 2 and err.startswith(f"usage: flarebench {argv[0]} ") and err.endswith(f"{said}\n"), err
