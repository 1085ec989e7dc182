"""A `Policy` of one's own that overrides `compute_actions_from_input_dict` acts through it
in the samplers, with RLlib 1.13's inference input dict: the observations, the infos
that came with them, the RNN states, the previous actions and rewards, and the view
columns it declared, ranged state views (`state_in_0` of `state_out_0`, shift "-2:-1")
included."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from corral.evaluation.rollout_worker import RolloutWorker
from corral.policy.policy import Policy
from corral.policy.sample_batch import SampleBatch
from corral.policy.view_requirement import ViewRequirement


class InfoEnv(gym.Env):
    """Observation = its step in the episode; each info names the step; 4-step episodes."""

    observation_space = gym.spaces.Box(0.0, 10.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros(1, np.float32), {"step": 0}

    def step(self, action):
        self.t += 1
        obs = np.full(1, self.t, np.float32)
        return obs, 1.0, self.t >= 4, False, {"step": self.t}


class WeightlessPolicy(Policy):
    """A `Policy` of one's own with no weights, learning nothing."""

    def learn_on_batch(self, samples):
        return {}

    def get_weights(self):
        return {}

    def set_weights(self, weights):
        pass


class RecordingPolicy(WeightlessPolicy):
    """Records the input dicts it is given; acts 1 always."""

    seen: list

    def __init__(self, observation_space, action_space, config):
        super().__init__(observation_space, action_space, config)
        self.seen = []

    def compute_actions_from_input_dict(self, input_dict, explore=None, timestep=None, **kw):
        self.seen.append({k: np.array(input_dict[k]) for k in input_dict})  # (copies)
        n = len(input_dict[SampleBatch.OBS])
        return np.ones(n, np.int64), [], {}

    def compute_actions(self, *args, **kwargs):
        raise AssertionError("the sampler must call the compute_actions_from_input_dict override")


def _worker(policy_cls, num_envs=1, fragment=8):
    return RolloutWorker(
        env_creator=lambda ctx: InfoEnv(),
        policy_spec=policy_cls,
        rollout_fragment_length=fragment,
        num_envs=num_envs,
    )


def test_the_override_is_called_with_the_infos_of_each_observation():
    worker = _worker(RecordingPolicy, num_envs=2)
    worker.sample()
    seen = worker.get_policy().seen
    assert len(seen) == 8
    for step in seen:
        obs, infos = step[SampleBatch.OBS], step[SampleBatch.INFOS]
        assert len(infos) == 2
        # The info is the one that came with the observation: the step's, {} after a
        # reset (RLlib 1.13's old-gym resets gave none).
        assert [info.get("step", 0) for info in infos] == [int(o[0]) for o in obs]
        assert all(info == {} for info, o in zip(infos, obs) if o[0] == 0)


class RangedStatePolicy(WeightlessPolicy):
    """RLlib 1.13's `BareMetalPolicyWithCustomViewReqs` shape: its state input is the last
    two state outputs (shift "-2:-1"); each state out is the step's observation."""

    def __init__(self, observation_space, action_space, config):
        super().__init__(observation_space, action_space, config)
        self.seen = []
        self.view_requirements["state_in_0"] = ViewRequirement(
            "state_out_0", shift="-2:-1", used_for_training=False, batch_repeat_value=1
        )
        self.view_requirements["state_out_0"] = ViewRequirement(
            space=gym.spaces.Box(-np.inf, np.inf, (3,), np.float64), used_for_training=False
        )

    def get_initial_state(self):
        return [np.zeros(3, np.float32)]

    def compute_actions_from_input_dict(self, input_dict, explore=None, timestep=None, **kw):
        states = input_dict["state_in_0"]
        obs = input_dict[SampleBatch.OBS]
        assert states.shape == (len(obs), 2, 3), states.shape
        self.seen.append((obs[:, 0].copy(), states[:, :, 0].copy()))
        state_out = np.repeat(obs, 3, axis=1).astype(np.float32) + 1.0  # obs + 1, three times
        return np.zeros(len(obs), np.int64), [state_out], {}


def test_a_ranged_state_view_gives_the_last_two_state_outputs_zeros_before_the_episode():
    worker = _worker(RangedStatePolicy, num_envs=2, fragment=6)
    worker.sample()
    for obs, states in worker.get_policy().seen:
        for o, (older, newer) in zip(obs, states):
            # At step t the state outputs of steps t-2 and t-1 were (t-2)+1 and (t-1)+1;
            # before the episode's first step they are zeros.
            assert newer == (o if o >= 1 else 0.0)
            assert older == (o - 1 if o >= 2 else 0.0)


def test_a_ranged_state_view_for_training_is_refused_naming_it():
    class Trains(RangedStatePolicy):
        def __init__(self, observation_space, action_space, config):
            super().__init__(observation_space, action_space, config)
            self.view_requirements["state_in_0"].used_for_training = True

    with pytest.raises(ValueError, match="state_in_0"):
        _worker(Trains).sample()


class CountingLearner(RecordingPolicy):
    """Learns by itself: RLlib 1.13's `train_one_step` called its `learn_on_batch`."""

    batches: list

    def __init__(self, observation_space, action_space, config):
        super().__init__(observation_space, action_space, config)
        self.batches = []

    def learn_on_batch(self, samples):
        self.batches.append(samples.count)
        return {"learner_stats": {"seen": samples.count}}


def test_a_trainer_calls_the_learn_on_batch_of_a_policy_that_learns_by_itself(tmp_path):
    from corral.agents.trainer import Trainer
    from corral.tune.registry import register_env

    register_env("input_dict_info_env", lambda ctx: InfoEnv())

    class OwnPolicyTrainer(Trainer):
        def get_default_policy_class(self, config):
            return CountingLearner

    trainer = OwnPolicyTrainer(
        config={"num_workers": 0, "train_batch_size": 40, "rollout_fragment_length": 20},
        env="input_dict_info_env",
    )
    try:
        result = trainer.train()
        assert trainer.get_policy().batches == [40]
        assert result["info"]["learner"]["default_policy"]["learner_stats"] == {"seen": 40}
        trainer.restore(trainer.save(str(tmp_path)))  # (no learner state to save)
    finally:
        trainer.stop()


def test_multi_agent_input_dicts_get_each_agent_s_infos():
    from corral.env.multi_agent_env import make_multi_agent

    env_cls = make_multi_agent(lambda config: InfoEnv())
    worker = RolloutWorker(
        env_creator=lambda ctx: env_cls({"num_agents": 2}),
        policy_spec=RecordingPolicy,
        rollout_fragment_length=8,
    )
    worker.sample()
    seen = worker.get_policy().seen
    assert seen
    for step in seen:
        obs, infos = step[SampleBatch.OBS], step[SampleBatch.INFOS]
        assert [info.get("step", 0) for info in infos] == [int(o[0]) for o in obs]
