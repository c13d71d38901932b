"""Operator settings from the environment: defaults, valid values, named errors."""

from __future__ import annotations

import pytest

from gputwin.operator.config import ConfigError, OperatorConfig


def test_defaults_use_the_sim_backend_everywhere() -> None:
    assert OperatorConfig.from_env({}) == OperatorConfig("sim", "", 8080)


@pytest.mark.parametrize(
    "env,message",
    [({"GPUTWIN_BACKEND": "yarn"}, "GPUTWIN_BACKEND: 'yarn'"), ({"GPUTWIN_HEALTH_PORT": "http"}, "GPUTWIN_HEALTH_PORT")],
    ids=["unknown-backend", "bad-port"],
)
def test_bad_settings_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        OperatorConfig.from_env(env)
