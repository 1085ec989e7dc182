"""A user's own recurrent model (a `RecurrentNetwork` subclass with its own `forward_rnn`,
no `forward_inference_rnn`) acts, bootstraps and trains through its module call."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from corral.agents.ppo import PPOTrainer
from corral.models import ModelCatalog
from corral.models.torch.recurrent_net import RecurrentNetwork
from corral.policy.sample_batch import SampleBatch


class CountingGRU(RecurrentNetwork, nn.Module):
    """A GRU on (obs, prev reward); counts the calls of forward_rnn."""

    calls = 0
    saw_prev_rewards = False

    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        nn.Module.__init__(self)
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.gru = nn.GRU(int(np.prod(obs_space.shape)) + 1, 16, batch_first=True)
        self.logits = nn.Linear(16, num_outputs)
        self.value = nn.Linear(16, 1)

    def get_initial_state(self):
        return [np.zeros(16, np.float32)]

    def rnn_inputs(self, input_dict):
        obs = input_dict[SampleBatch.OBS].float()
        prev_r = input_dict.get(SampleBatch.PREV_REWARDS)
        if prev_r is not None:
            type(self).saw_prev_rewards = True
            prev_r = torch.as_tensor(prev_r).float().reshape(-1, 1)
        else:
            prev_r = torch.zeros(len(obs), 1)
        return torch.cat([obs.reshape(len(obs), -1), prev_r], -1)

    def forward_rnn(self, inputs, state, seq_lens):
        type(self).calls += 1
        out, h = self.gru(inputs, state[0].unsqueeze(0))
        self._value = self.value(out).reshape(-1)
        return self.logits(out), [h.squeeze(0)]

    def value_function(self):
        return self._value


def test_custom_recurrent_model_acts_and_trains():
    ModelCatalog.register_custom_model("counting_gru", CountingGRU)
    trainer = PPOTrainer(
        env="CartPole-v1",
        config={
            "model": {"custom_model": "counting_gru", "max_seq_len": 10},
            "num_workers": 0,
            "rollout_fragment_length": 64,
            "train_batch_size": 64,
            "sgd_minibatch_size": 32,
            "num_sgd_iter": 1,
            "seed": 0,
        },
    )
    try:
        policy = trainer.get_policy()
        assert policy.is_recurrent()
        CountingGRU.calls = 0
        result = trainer.train()
        assert result["timesteps_total"] == 64
        # 64 acting steps, the bootstrap at the fragment cut, and the minibatches.
        assert CountingGRU.calls > 64
        assert CountingGRU.saw_prev_rewards
        action, state, _ = trainer.compute_single_action(
            np.zeros(4, np.float32), state=policy.get_initial_state()
        )
        assert action in (0, 1) and state[0].shape == (16,)
    finally:
        trainer.stop()


def test_use_lstm_keeps_its_fast_path():
    trainer = PPOTrainer(env="CartPole-v1", config={"num_workers": 0, "model": {"use_lstm": True}})
    try:
        assert trainer.get_policy()._fast_rnn_step is not None
    finally:
        trainer.stop()
