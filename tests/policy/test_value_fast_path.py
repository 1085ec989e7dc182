"""`TorchPolicy.value` (bootstrapping cut trajectories): the built-in models' value branch
alone (`value_only`), the same values as the module call (to float32 rounding); a model
that overrides what the fast path stands for goes through the module call."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.ppo import DEFAULT_CONFIG
from corral.agents.ppo.ppo_torch_policy import PPOTorchPolicy
from corral.models.catalog import ModelCatalog
from corral.models.torch.fcnet import FullyConnectedNetwork

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Discrete(2)


def make_policy(**model) -> PPOTorchPolicy:
    config = {**DEFAULT_CONFIG, "model": {**DEFAULT_CONFIG["model"], "fcnet_hiddens": [8, 8]}}
    config["model"].update(model)
    return PPOTorchPolicy(OBS, ACT, config)


def module_values(policy: PPOTorchPolicy, obs: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        policy.model({"obs": torch.from_numpy(obs)}, [], None)
        return policy.model.value_function().numpy()


@pytest.mark.parametrize("share", [True, False])
def test_value_takes_the_value_branch_alone(share, monkeypatch):
    policy = make_policy(vf_share_layers=share)
    obs = np.random.default_rng(0).uniform(-1, 1, (5, 3)).astype(np.float32)
    assert policy._fast_value is not None

    def no_policy_head(*_a, **_k):
        raise AssertionError("the policy head ran to compute values")

    monkeypatch.setattr(policy.model, "forward_inference", no_policy_head)
    # (To float32 rounding: these few rows run in numpy, which sums in another order.)
    np.testing.assert_allclose(policy.value(obs), module_values(policy, obs), rtol=1e-5, atol=1e-6)


class HalvedValues(FullyConnectedNetwork):
    """A user's model whose `value_function` differs from the value branch."""

    def value_function(self):
        return super().value_function() / 2


def test_a_model_overriding_value_function_goes_through_the_module_call():
    ModelCatalog.register_custom_model("halved_values_fast_path_test", HalvedValues)
    policy = make_policy(custom_model="halved_values_fast_path_test")
    assert policy._fast_value is None
    obs = np.random.default_rng(1).uniform(-1, 1, (4, 3)).astype(np.float32)
    np.testing.assert_allclose(policy.value(obs), module_values(policy, obs), rtol=1e-6)
