"""RLlib 1.13's command names on `PolicyClient` (`PolicyClient.GET_ACTION`, ...)."""

from __future__ import annotations

from corral.env.policy_client import PolicyClient
from corral.env.serving_wire import Commands

NAMES = [
    "ACTION_SPACE",
    "OBSERVATION_SPACE",
    "GET_WORKER_ARGS",
    "GET_WEIGHTS",
    "REPORT_SAMPLES",
    "START_EPISODE",
    "GET_ACTION",
    "LOG_ACTION",
    "LOG_RETURNS",
    "END_EPISODE",
]


def test_command_constants_are_rllib_1_13_s_strings():
    for name in NAMES:
        assert getattr(PolicyClient, name) == name == getattr(Commands, name)
