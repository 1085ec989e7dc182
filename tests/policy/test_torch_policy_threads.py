"""A policy's model shared by an acting thread and a learner thread (asynchronous
algorithms with the local worker sampling): a model call and its value_function() read
stay one step, as under RLlib's policy lock."""

from __future__ import annotations

import threading

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.agents.pg.pg_torch_policy import PGTorchPolicy
from corral.agents.trainer import COMMON_CONFIG
from corral.models import ModelCatalog
from corral.models.torch.torch_modelv2 import TorchModelV2
from corral.utils.threading import with_lock

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACT = gym.spaces.Discrete(2)


class ActsWhileTraining(TorchModelV2, nn.Module):
    """A user's model (no fast path): caches its features for value_function(); its
    first training forward lets another thread act before it returns."""

    policy: PGTorchPolicy | None = None

    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        self.body = nn.Linear(4, 8)
        self.logits = nn.Linear(8, num_outputs)
        self.value = nn.Linear(8, 1)
        self.actor_ran_inside = None

    def forward(self, input_dict, state, seq_lens):
        self._features = torch.tanh(self.body(input_dict["obs"].float()))
        if len(self._features) > 1 and self.actor_ran_inside is None:
            actor = threading.Thread(
                target=self.policy.compute_actions, args=(np.zeros((1, 4), np.float32),)
            )
            actor.start()
            actor.join(timeout=0.5)  # under the policy's lock the actor waits for us
            self.actor_ran_inside = not actor.is_alive()
            self._actor = actor
        return self.logits(self._features), state

    def value_function(self):
        return self.value(self._features).squeeze(-1)


ModelCatalog.register_custom_model("acts_while_training", ActsWhileTraining)


def test_acting_waits_for_a_training_forward_and_its_values():
    config = {**COMMON_CONFIG, "model": {"custom_model": "acts_while_training"}}
    policy = PGTorchPolicy(OBS, ACT, config)
    policy.model.policy = policy
    train_batch = {"obs": torch.rand(40, 4)}
    out, values = policy.forward_train(train_batch)
    policy.model._actor.join()
    assert policy.model.actor_ran_inside is False
    assert out.shape == (40, 2) and values.shape == (40,)


def test_rllibs_with_lock_works_on_a_torch_policy():
    class Counting(PGTorchPolicy):
        @with_lock
        def locked_compute(self, obs):
            return self.compute_actions(obs)[0]  # re-enters the (reentrant) lock

    policy = Counting(OBS, ACT, {**COMMON_CONFIG})
    assert policy.locked_compute(np.zeros((3, 4), np.float32)).shape == (3,)
