"""Operator settings from the environment: defaults, valid values, named errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gputwin.cli.main import cli
from gputwin.operator.config import ConfigError, OperatorConfig, forecast_start_latency
from gputwin.operator.forecasts import ForecastSettings

CLUSTER = str(Path(__file__).resolve().parents[2] / "manifests" / "samples" / "two-leaf.yaml")


def test_defaults_use_the_sim_backend_everywhere() -> None:
    assert OperatorConfig.from_env({}) == OperatorConfig("sim", "", 8080, 0.5)
    assert OperatorConfig.from_env({"GPUTWIN_PASS_DUTY": "0.25"}).pass_duty == 0.25


@pytest.mark.parametrize(
    "env,message",
    [({"GPUTWIN_BACKEND": "yarn"}, "GPUTWIN_BACKEND: 'yarn'"), ({"GPUTWIN_HEALTH_PORT": "http"}, "GPUTWIN_HEALTH_PORT"),
     ({"GPUTWIN_PASS_DUTY": "2"}, "GPUTWIN_PASS_DUTY='2'")],
    ids=["unknown-backend", "bad-port", "bad-pass-duty"],
)
def test_bad_settings_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        OperatorConfig.from_env(env)


LATENCY = "GPUTWIN_FORECAST_START_LATENCY"


@pytest.mark.parametrize(
    "raw,seconds",
    [(None, 0.0), ("", 0.0), (" ", 0.0), ("0", 0.0), ("0.47", 0.47), (" 2.5 ", 2.5), ("3600", 3600.0)],
    ids=["unset", "empty", "blank", "zero", "measured", "padded", "at-the-bound"],
)
def test_forecast_start_latency_reads_seconds_or_defaults_to_not_modelled(raw: str | None, seconds: float) -> None:
    env = {} if raw is None else {LATENCY: raw}
    assert forecast_start_latency(env) == seconds
    assert ForecastSettings.from_env(env).start_latency == seconds


@pytest.mark.parametrize(
    "raw",
    ["-0.5", "3600.5", "1e9", "inf", "nan", "fast", "1s", "0x10"],
    ids=["negative", "just-too-big", "too-big", "infinite", "nan", "a-word", "with-unit", "hex"],
)
def test_bad_forecast_start_latency_is_one_line_naming_the_variable(raw: str) -> None:
    for read in (forecast_start_latency, ForecastSettings.from_env):
        with pytest.raises(ConfigError) as caught:
            read({LATENCY: raw})
        assert str(caught.value).startswith(f"{LATENCY}={raw!r}: ") and "\n" not in str(caught.value)
        assert "[0, 3600]" in str(caught.value)


@pytest.mark.parametrize(
    "args,status",
    [(["forecast", "--kube", "--kubeconfig", "/nonexistent/kubeconfig"], 2), (["apply", "-f", CLUSTER], 1)],
    ids=["forecast-kube", "emulator-apply"],
)
def test_bad_forecast_start_latency_is_refused_at_start_up_in_one_line(args: list[str], status: int,
                                                                       tmp_path: Path) -> None:  # fmt: skip
    """`forecast --kube` reads the setting as the operator does, before connecting (a user error: 2);
    the emulator writes forecasts after `apply`, as the operator does (it exits as kubectl does: 1)."""
    runner = CliRunner(env={LATENCY: "-1", "GPUTWIN_FORECAST_SECONDS": "60", "GPUTWIN_STATE": str(tmp_path)})
    result = runner.invoke(cli, args)
    assert result.exit_code == status, result.output
    assert result.stderr.startswith(f"error: {LATENCY}='-1': ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr
