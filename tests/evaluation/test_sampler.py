"""The sampling loop: batch layout, horizons, batch modes, callbacks, errors."""

import re

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.callbacks import DefaultCallbacks
from corral.agents.ppo import PPOTrainer
from corral.policy.sample_batch import SampleBatch
from corral.utils.error import EnvError

SMALL = {
    "num_workers": 0,
    "rollout_fragment_length": 10,
    "train_batch_size": 40,
    "sgd_minibatch_size": 20,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [8]},
}


class CountingEnv(gym.Env):
    """Obs = step counter; terminates after `length` steps; reward 1 per step."""

    observation_space = gym.spaces.Box(0, 1000, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.length = (config or {}).get("length", 5)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t], np.float32), 1.0, self.t >= self.length, False, {"t": self.t}


def make_trainer(**overrides):
    config = {**SMALL, **overrides}
    return PPOTrainer(config=config, env=CountingEnv)


def test_fragment_layout_is_env_major():
    trainer = make_trainer(num_envs_per_worker=3, env_config={"length": 4})
    try:
        batch = trainer.workers.local_worker().sample()
        assert batch.count == 30
        env_ids = batch[SampleBatch.ENV_ID]
        assert env_ids.tolist() == [0] * 10 + [1] * 10 + [2] * 10
        # Within one env: obs counts 0..3 then restarts after termination.
        np.testing.assert_array_equal(
            batch[SampleBatch.OBS][:10, 0], [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]
        )
        np.testing.assert_array_equal(batch[SampleBatch.NEXT_OBS][:4, 0], [1, 2, 3, 4])
        assert batch[SampleBatch.TERMINATEDS][:10].tolist() == [False, False, False, True] * 2 + [
            False,
            False,
        ]
        assert SampleBatch.ADVANTAGES in batch and SampleBatch.VALUE_TARGETS in batch
        eps = batch[SampleBatch.EPS_ID][:10]
        assert eps[0] == eps[3] != eps[4]
    finally:
        trainer.stop()


def test_horizon_is_a_truncation():
    trainer = make_trainer(horizon=3, env_config={"length": 100})
    try:
        batch = trainer.workers.local_worker().sample()
        assert batch[SampleBatch.TRUNCATEDS].tolist()[:6] == [False, False, True] * 2
        assert not batch[SampleBatch.TERMINATEDS].any()
        assert batch[SampleBatch.OBS][:4, 0].tolist() == [0, 1, 2, 0]  # env was reset
    finally:
        trainer.stop()


def test_soft_horizon_keeps_the_env_running_and_truncates():
    # RLlib 1.13's sampler recorded done=False at a soft cut: the value bootstraps there.
    trainer = make_trainer(horizon=3, soft_horizon=True, env_config={"length": 100})
    try:
        batch = trainer.workers.local_worker().sample()
        assert batch[SampleBatch.OBS][:6, 0].tolist() == [0, 1, 2, 3, 4, 5]  # no reset
        assert batch[SampleBatch.TRUNCATEDS][:6].tolist() == [False, False, True] * 2
        assert not batch[SampleBatch.TERMINATEDS].any()
        # RLlib 1.13's `dones` is False at a soft cut (1.x code bootstraps on it).
        assert not batch[SampleBatch.DONES].any()
        eps = batch[SampleBatch.EPS_ID]
        assert eps[2] != eps[3]  # a new episode starts at the horizon
    finally:
        trainer.stop()


def test_no_done_at_end_never_marks_terminated():
    trainer = make_trainer(no_done_at_end=True, env_config={"length": 4})
    try:
        batch = trainer.workers.local_worker().sample()
        assert not batch[SampleBatch.TERMINATEDS].any()
        assert batch[SampleBatch.TRUNCATEDS][:4].tolist() == [False, False, False, True]
        assert not batch[SampleBatch.DONES].any()  # RLlib 1.13's: never done
        assert batch[SampleBatch.OBS][:5, 0].tolist() == [0, 1, 2, 3, 0]
    finally:
        trainer.stop()


def test_complete_episodes_mode_returns_whole_episodes():
    trainer = make_trainer(batch_mode="complete_episodes", env_config={"length": 7})
    try:
        worker = trainer.workers.local_worker()
        for _ in range(3):
            batch = worker.sample()
            assert batch.count >= 10
            for episode in batch.split_by_episode():
                assert episode.count == 7
                assert episode[SampleBatch.OBS][0, 0] == 0
                assert episode[SampleBatch.DONES][-1]
    finally:
        trainer.stop()


def test_episode_metrics_reported():
    trainer = make_trainer(env_config={"length": 4})
    try:
        result = trainer.train()
        assert result["episode_reward_mean"] == 4.0
        assert result["episode_len_mean"] == 4.0
        assert result["episodes_this_iter"] == 10
        assert result["hist_stats"]["episode_reward"][:3] == [4.0, 4.0, 4.0]
    finally:
        trainer.stop()


class WrongShapeEnv(CountingEnv):
    def step(self, action):
        obs, *rest = super().step(action)
        return np.zeros(3, np.float32), *rest


def test_wrong_shaped_observation_is_named():
    trainer = PPOTrainer(config=SMALL, env=WrongShapeEnv)
    try:
        with pytest.raises(EnvError, match=r"shape \(3,\).*expects shape \(1,\)"):
            trainer.workers.local_worker().sample()
    finally:
        trainer.stop()


class NanEnv(CountingEnv):
    def step(self, action):
        obs, _, *rest = super().step(action)
        return obs, float("nan"), *rest


def test_nan_reward_is_an_error():
    trainer = PPOTrainer(config=SMALL, env=NanEnv)
    try:
        with pytest.raises(EnvError, match="NaN or inf"):
            trainer.workers.local_worker().sample()
    finally:
        trainer.stop()


class ArrayRewardEnv(CountingEnv):
    def step(self, action):
        obs, reward, *rest = super().step(action)
        return obs, np.array([reward]), *rest


class TextRewardEnv(CountingEnv):
    def step(self, action):
        obs, reward, *rest = super().step(action)
        return obs, str(reward), *rest


@pytest.mark.parametrize(
    ("env_class", "value"),
    [(ArrayRewardEnv, r"array\(\[1\.\]\)"), (TextRewardEnv, r"'1\.0' \(a str")],
)
def test_a_reward_that_is_no_number_is_named(env_class, value):
    # Single-agent and multi-agent sampling alike name the env, the agent and the value
    # (numpy's "setting an array element with a sequence" and float()'s TypeError before;
    # a numeric string was converted silently).
    from corral.env.multi_agent_env import make_multi_agent

    for env, who in (
        (env_class, f"'{env_class.__name__}' (sub-env 0"),
        (
            make_multi_agent(lambda _: env_class()),
            "(agent 0 of sub-env 0",
        ),
    ):
        trainer = PPOTrainer(config=SMALL, env=env)
        try:
            with pytest.raises(EnvError, match=rf"{re.escape(who)}.* the reward {value}"):
                trainer.workers.local_worker().sample()
        finally:
            trainer.stop()


class FlagEnv(CountingEnv):
    """Ends its episodes with `flag` as `terminated` (or `truncated`)."""

    def __init__(self, config=None):
        super().__init__(config)
        self.flag, self.which = (config or {})["flag"], (config or {}).get("which", 2)

    def step(self, action):
        out = list(super().step(action))
        ended = out[2]
        out[2] = False
        out[self.which] = self.flag if ended else False
        return tuple(out)


@pytest.mark.parametrize(("flag", "which"), [("yes", 2), (2, 3), (0.5, 2)])
def test_a_true_flag_that_is_no_bool_is_named(flag, which):
    # numpy wrote it as True while the episode went on ("yes" is not `True`): a row
    # marked as ended inside one episode (RLlib 1.13's env check refused such flags).
    name = ("terminated", "truncated")[which - 2]
    trainer = PPOTrainer(
        config={**SMALL, "env_config": {"flag": flag, "which": which}}, env=FlagEnv
    )
    try:
        with pytest.raises(EnvError, match=rf"'FlagEnv' \(sub-env 0 .* {name}={flag!r} \(a "):
            trainer.workers.local_worker().sample()
    finally:
        trainer.stop()


@pytest.mark.parametrize("flag", [1, np.True_, np.int64(1)])
def test_flags_equal_to_true_end_the_episode(flag):
    trainer = PPOTrainer(config={**SMALL, "env_config": {"flag": flag}}, env=FlagEnv)
    try:
        batch = trainer.workers.local_worker().sample()
        ended = np.flatnonzero(batch[SampleBatch.TERMINATEDS])[:-1]  # (rows after each end)
        eps = batch[SampleBatch.EPS_ID]
        assert len(ended) and (eps[ended + 1] != eps[ended]).all()
    finally:
        trainer.stop()


class RecordingCallbacks(DefaultCallbacks):
    calls: list = []

    def on_episode_start(self, *, worker, base_env, policies, episode, **kwargs):
        assert episode.length == 0 and "default_policy" in policies
        assert base_env.get_sub_environments()
        self.calls.append(("start", episode.episode_id))

    def on_episode_step(self, *, worker, base_env, policies=None, episode, **kwargs):
        episode.user_data.setdefault("steps", 0)
        episode.user_data["steps"] += 1
        assert episode.last_action_for() is not None

    def on_episode_end(self, *, worker, base_env, policies, episode, **kwargs):
        episode.custom_metrics["steps_seen"] = episode.user_data["steps"]
        self.calls.append(("end", episode.episode_id))

    def on_postprocess_trajectory(
        self,
        *,
        worker,
        episode,
        agent_id,
        policy_id,
        policies,
        postprocessed_batch,
        original_batches,
        **kwargs,
    ):
        assert SampleBatch.ADVANTAGES in postprocessed_batch
        self.calls.append(("postprocess", postprocessed_batch.count))

    def on_sample_end(self, *, worker, samples, **kwargs):
        self.calls.append(("sample_end", samples.count))

    def on_learn_on_batch(self, *, policy, train_batch, result, **kwargs):
        self.calls.append(("learn", train_batch.count))

    def on_train_result(self, *, trainer, result, **kwargs):
        result["callback_was_here"] = True
        self.calls.append(("train_result", result["training_iteration"]))


def test_callbacks_called_with_documented_arguments():
    RecordingCallbacks.calls = []
    trainer = make_trainer(callbacks=RecordingCallbacks, env_config={"length": 5})
    try:
        result = trainer.train()
    finally:
        trainer.stop()
    kinds = [c[0] for c in RecordingCallbacks.calls]
    assert {"start", "end", "postprocess", "sample_end", "learn", "train_result"} <= set(kinds)
    assert result["callback_was_here"]
    assert result["custom_metrics"]["steps_seen_mean"] == 5
    assert ("learn", 40) in RecordingCallbacks.calls
    assert kinds[-1] == "train_result"


def test_batches_do_not_alias_the_sampler_buffers():
    trainer = make_trainer(num_envs_per_worker=1, env_config={"length": 100})
    try:
        worker = trainer.workers.local_worker()
        first = worker.sample()
        obs_before = first[SampleBatch.OBS].copy()
        worker.sample()
        np.testing.assert_array_equal(first[SampleBatch.OBS], obs_before)
    finally:
        trainer.stop()


@pytest.mark.parametrize("fragment", [1, 10])
def test_finished_episodes_are_forgotten_and_trajectories_find_theirs(fragment):
    """The sampler keeps an `Episode` only while a trajectory may still ask for it: after
    each `sample()` (which postprocesses with the episodes that ended in it), at most the
    sub-envs' current episodes and those that ended in the last fragment."""
    trainer = make_trainer(rollout_fragment_length=fragment, num_envs_per_worker=2)
    try:
        worker = trainer.workers.local_worker()
        sampler = worker.sampler
        seen = set()
        for _ in range(40 // fragment + 3):
            batch = worker.sample()
            for eps_id in np.unique(batch[SampleBatch.EPS_ID]):
                seen.add(int(eps_id))
                assert sampler.episode_for(eps_id).episode_id == eps_id
            assert len(sampler._episodes_by_id) <= 2 + 2 * -(-fragment // 5)
        assert len(seen) > 6  # many episodes came and went
    finally:
        trainer.stop()


class ActionMutatingEnv(gym.Env):
    """Writes into the action it is given (an env bug RLlib 1.13 made fail)."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Box(-1, 1, (2,), np.float32)

    def __init__(self, config=None):
        pass

    def reset(self, *, seed=None, options=None):
        return np.zeros(2, np.float32), {}

    def step(self, action):
        action[0] = 0.0
        return np.zeros(2, np.float32), 0.0, False, False, {}


@pytest.mark.parametrize("multi_agent", [False, True])
def test_actions_are_read_only_for_the_env(multi_agent):
    # As in RLlib 1.13: an env that changes its action in place fails at once, where it
    # would otherwise change the action an episode or batch holds (the same memory).
    from corral.env.multi_agent_env import make_multi_agent

    env = make_multi_agent(lambda _: ActionMutatingEnv()) if multi_agent else ActionMutatingEnv
    config = {**SMALL, "env_config": {"num_agents": 2}} if multi_agent else SMALL
    trainer = PPOTrainer(config={**config, "normalize_actions": False}, env=env)
    try:
        with pytest.raises(ValueError, match="read-only"):
            trainer.workers.local_worker().sample()
    finally:
        trainer.stop()
