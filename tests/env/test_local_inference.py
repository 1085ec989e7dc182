"""`corral.env.local_inference`: how the server names each policy's algorithm for a
local-inference client (a lookup in the algorithm registry)."""

from __future__ import annotations

import sys

import pytest

from corral.agents.ppo import PPOTorchPolicy, PPOTrainer
from corral.agents.ppo.ppo import DEFAULT_CONFIG
from corral.agents.registry import loaded_trainer_classes
from corral.agents.trainer import Trainer
from corral.env.local_inference import algorithm_name
from corral.policy.policy import Policy
from corral.tune.registry import _global_registry, register_trainable


@pytest.fixture
def registered(monkeypatch):
    """Registers trainables for one test only."""
    monkeypatch.setattr(_global_registry, "_values", dict(_global_registry._values))

    def register(name: str, cls: type) -> None:
        register_trainable(name, cls)

    return register


def test_a_script_s_alias_does_not_hide_corral_s_own_name(registered):
    # The server script registers PPO under a name of its own: the client need not
    # know that name, PPO (which every client has) is the one sent.
    registered("AServerAliasOfPPO", PPOTrainer)
    assert algorithm_name(PPOTorchPolicy, DEFAULT_CONFIG) == "PPO"


def test_an_algorithm_the_script_registered_is_found_by_its_name(registered):
    class OwnPolicy(PPOTorchPolicy):
        pass

    class OwnTrainer(PPOTrainer):
        def get_default_policy_class(self, config: dict) -> type[Policy]:
            return OwnPolicy

    class Unregistered(Trainer):
        def get_default_policy_class(self, config: dict) -> type[Policy]:
            return OwnPolicy

    assert algorithm_name(OwnPolicy, DEFAULT_CONFIG) is None  # not registered yet
    registered("OwnAlgo", OwnTrainer)
    assert ("OwnAlgo", OwnTrainer) in loaded_trainer_classes()
    assert algorithm_name(OwnPolicy, DEFAULT_CONFIG) == "OwnAlgo"
    assert Unregistered.__name__ not in dict(loaded_trainer_classes())


def test_the_lookup_imports_no_algorithm():
    before = set(sys.modules)
    names = dict(loaded_trainer_classes())
    assert set(sys.modules) == before
    assert names["PPO"] is PPOTrainer
