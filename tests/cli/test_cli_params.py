"""Numeric options refuse NaN and infinity with a usage error (exit 2), before a command does anything.

click's `FloatRange` lets "nan" through every bound (each comparison with NaN is false) and "inf"
through an open upper one; `gputwin.cli.params.FiniteRange` refuses both.
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from gputwin.cli.main import cli
from gputwin.cli.params import FiniteRange

SNAPSHOT = Path(__file__).resolve().parents[1] / "twin" / "data" / "philly-mix1-2vc.snapshot.json"


@pytest.mark.parametrize(
    ("text", "bounds", "ok"),
    [
        ("1.5", (0, 3600), True),
        ("0", (0, None), True),
        ("nan", (0, 3600), False),
        ("NaN", (None, None), False),
        ("inf", (0, None), False),
        ("-inf", (None, None), False),
        ("-1", (0, None), False),  # click's own bound still applies
        ("abc", (0, None), False),
    ],
)  # fmt: skip
def test_finite_range_takes_finite_numbers_within_its_bounds(text: str, bounds: tuple, ok: bool) -> None:
    kind = FiniteRange(*bounds)
    if ok:
        assert kind.convert(text, None, None) == float(text)
    else:
        with pytest.raises(click.BadParameter):
            kind.convert(text, None, None)


@pytest.mark.parametrize(
    "argv",
    [
        ["forecast", "--snapshot", str(SNAPSHOT), "--start-latency", "nan"],
        ["whatif", "--snapshot", str(SNAPSHOT), "--policy", "fifo", "--start-latency", "nan"],
        ["run", "--until", "inf"],
        ["run", "--until", "nan"],
    ],
    ids=["forecast-latency", "whatif-latency", "run-until-inf", "run-until-nan"],
)
def test_a_command_refuses_a_non_finite_number(argv: list[str], tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, argv, env={"GPUTWIN_STATE": str(tmp_path / "state")})
    assert result.exit_code == 2, result.output
    assert "is not a finite number" in result.output
