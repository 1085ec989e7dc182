"""`Policy.global_timestep` as RLlib 1.13 kept it: each acting call moves it on by its
batch's rows (exploration acts at the value before the call), and the trainer's weight
syncs set it to the trainer's count of sampled steps."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from corral.agents.pg import DEFAULT_CONFIG, PGTrainer
from corral.agents.pg.pg_torch_policy import PGTorchPolicy
from tests.fixtures.configs import SMALL_CARTPOLE

SPACES = (gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2))


def test_each_acting_call_adds_its_batch_size_and_a_sync_sets_it():
    trainer = PGTrainer(config=SMALL_CARTPOLE)
    try:
        policy = trainer.get_policy()
        assert policy.global_timestep == 0
        obs = np.zeros(4, np.float32)
        for i in range(1, 4):
            trainer.compute_single_action(obs)
            assert policy.global_timestep == i
        policy.compute_actions(np.zeros((5, 4), np.float32))
        assert policy.global_timestep == 8
        policy.compute_actions_from_input_dict({"obs": np.zeros((2, 4), np.float32)})
        assert policy.global_timestep == 10
        policy.on_global_var_update({"timestep": 10**11})
        policy.compute_actions(np.zeros((3, 4), np.float32))
        assert policy.global_timestep == 10**11 + 3
        # Sampling moves it too; the sync at the end of the iteration sets it to the
        # trainer's count of sampled steps.
        before = policy.global_timestep
        trainer.workers.local_worker().sample()
        assert policy.global_timestep == before + SMALL_CARTPOLE["rollout_fragment_length"]
        result = trainer.train()
        assert policy.global_timestep == result["timesteps_total"]
    finally:
        trainer.stop()


def test_an_action_sampler_fn_sees_the_timestep_before_the_call():
    seen: list[int] = []

    def sampler(policy, model, obs_batch, *, explore, timestep):
        seen.append(timestep)
        n = len(obs_batch)
        return torch.zeros(n, dtype=torch.int64), torch.zeros(n), torch.zeros(n, 2), []

    policy = PGTorchPolicy.with_updates(action_sampler_fn=sampler)(
        *SPACES, {**DEFAULT_CONFIG, "seed": 0}
    )
    policy.compute_actions_from_obs(np.zeros((4, 4), np.float32))
    policy.compute_actions_from_obs(np.zeros((2, 4), np.float32))
    assert seen == [0, 4]
    assert policy.global_timestep == 6
