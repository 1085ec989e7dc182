"""Multi-agent sampling with stateful policies (RNNs, custom policies with a state), RLlib
1.13's policy_mapping_fn fallback, and subclass losses that read their own columns."""

from __future__ import annotations

import random

import gymnasium as gym
import numpy as np

from corral.agents.pg import PGTrainer
from corral.agents.ppo import PPOTrainer
from corral.agents.ppo.ppo_torch_policy import PPOTorchPolicy
from corral.env.multi_agent_env import make_multi_agent
from corral.policy.policy import Policy, PolicySpec

Two = make_multi_agent("CartPole-v1")


class RepeatStateHeuristic(Policy):
    """Plays the action held in its state (RLlib's AlwaysSameHeuristic shape)."""

    seen_obs_shapes: list = []

    def get_initial_state(self):
        return [random.choice([0, 1])]

    def compute_actions(self, obs_batch, state_batches=None, **kwargs):
        RepeatStateHeuristic.seen_obs_shapes.append(np.shape(obs_batch))
        return state_batches[0], state_batches, {}

    def learn_on_batch(self, samples):
        return {}


def test_stateful_custom_policy_and_lstm_policy_in_one_env():
    config = {
        "env": Two,
        "env_config": {"num_agents": 2},
        "num_workers": 0,
        "rollout_fragment_length": 20,
        "train_batch_size": 40,
        "multiagent": {
            "policies": {
                "heuristic": PolicySpec(policy_class=RepeatStateHeuristic),
                "learned": PolicySpec(config={"model": {"use_lstm": True, "lstm_cell_size": 8}}),
            },
            # RLlib 1.13 falls back to fn(agent_id) when the new signature does not fit.
            "policy_mapping_fn": lambda aid: "learned" if aid == 0 else "heuristic",
            "policies_to_train": ["learned"],
        },
    }
    trainer = PGTrainer(config=config)
    try:
        batch = trainer.workers.local_worker().sample()
        heuristic = batch.policy_batches["heuristic"]
        # The action is the state it got: constant within an episode.
        for eps in np.unique(heuristic["eps_id"]):
            rows = heuristic["eps_id"] == eps
            assert len(set(heuristic["actions"][rows].tolist())) == 1
            np.testing.assert_array_equal(heuristic["state_in_0"][rows], heuristic["actions"][rows])
        learned = batch.policy_batches["learned"]
        assert {"state_in_0", "state_out_0", "prev_actions", "prev_rewards"} <= set(learned)
        assert trainer.train()["info"]["learner"]["learned"]["learner_stats"]
        # Custom policies get preprocessed observations too (RLlib 1.13).
        assert RepeatStateHeuristic.seen_obs_shapes[-1][1:] == (4,)
    finally:
        trainer.stop()


class ExtraColumnPPO(PPOTorchPolicy):
    """Adds a column in postprocessing and reads it in an overridden loss."""

    def postprocess_trajectory(self, sample_batch, other_agent_batches=None, episode=None):
        sample_batch["my_column"] = np.ones(sample_batch.count, np.float32)
        return super().postprocess_trajectory(sample_batch, other_agent_batches, episode)

    def loss(self, model, dist_class, train_batch):
        assert "my_column" in train_batch
        self.device_seen = self.device
        return super().loss(model, dist_class, train_batch)


class ExtraColumnTrainer(PPOTrainer):
    def get_default_policy_class(self, config):
        return ExtraColumnPPO


def test_subclass_loss_reads_its_own_columns():
    config = {
        "env": "CartPole-v1",
        "num_workers": 0,
        "rollout_fragment_length": 20,
        "train_batch_size": 40,
        "sgd_minibatch_size": 20,
        "num_sgd_iter": 1,
    }
    trainer = ExtraColumnTrainer(config=config)
    try:
        trainer.train()
        assert str(trainer.get_policy().device_seen) == "cpu"
    finally:
        trainer.stop()


def test_numpy_1_aliases_for_rllib_1_code():
    import corral.utils.annotations  # noqa: F401 - installs them
    from corral.utils.numpy_compat import install

    install()
    assert np.product([2, 3]) == 6  # noqa: NPY003
    assert np.bool8 is np.bool_
    assert gym  # gymnasium still imports fine
