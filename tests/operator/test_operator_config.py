"""Operator settings from the environment: defaults, valid values, named errors."""

from __future__ import annotations

import pytest

from gputwin.operator.config import ConfigError, OperatorConfig


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
