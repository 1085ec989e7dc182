"""Multi-agent sampling and training: MultiAgentSampler, policies_to_train,
count_steps_by, add_policy/remove_policy, metrics and the PettingZoo wrapper."""

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.callbacks import DefaultCallbacks
from corral.agents.ppo import PPOTrainer
from corral.env import MultiAgentEnv, PettingZooEnv
from corral.env.multi_agent_env import make_multi_agent
from corral.evaluation.observation_function import ObservationFunction
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch

OBS = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
ACT = gym.spaces.Discrete(2)
TwoCartPoles = make_multi_agent("CartPole-v1")


class JoinLeaveEnv(MultiAgentEnv):
    """Agent "a" acts at steps 0-4 and then terminates; "b" joins at step 3; the
    episode ends after step 7. Rewards: 1 per step for "a", 10 for "b"."""

    possible_agents = ["a", "b"]
    observation_space = OBS
    action_space = ACT

    def __init__(self, config=None):
        super().__init__()
        self.t = 0

    def _obs(self, agent):
        return np.array([self.t, 0.0 if agent == "a" else 1.0], np.float32)

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return {"a": self._obs("a")}, {}

    def step(self, action_dict):
        self.t += 1
        rewards = {agent: (1.0 if agent == "a" else 10.0) for agent in action_dict}
        terminateds = {"__all__": self.t == 8}
        obs = {}
        if self.t < 5:
            obs["a"] = self._obs("a")
        elif "a" in action_dict:
            obs["a"] = self._obs("a")
            terminateds["a"] = True
        if self.t >= 3 and self.t < 8:
            obs["b"] = self._obs("b")
        if self.t == 8:
            terminateds["b"] = True
            obs["b"] = self._obs("b")
        return obs, rewards, terminateds, {"__all__": False}, {}


def small_config(**overrides) -> dict:
    config = {
        "num_workers": 0,
        "num_envs_per_worker": 2,
        "rollout_fragment_length": 16,
        "train_batch_size": 64,
        "sgd_minibatch_size": 32,
        "num_sgd_iter": 2,
        "model": {"fcnet_hiddens": [8]},
        "seed": 0,
    }
    config.update(overrides)
    return config


def two_policy_multiagent(**overrides) -> dict:
    return {
        "policies": {"p0", "p1"},
        "policy_mapping_fn": lambda agent_id, episode, worker, **kw: f"p{agent_id}",
        **overrides,
    }


def test_agents_joining_and_leaving_get_their_own_trajectories():
    trainer = PPOTrainer(
        env=JoinLeaveEnv,
        config=small_config(
            num_envs_per_worker=1,
            rollout_fragment_length=8,
            batch_mode="complete_episodes",
            multiagent={
                "policies": {"pa", "pb"},
                "policy_mapping_fn": lambda agent_id, episode, worker, **kw: f"p{agent_id}",
            },
        ),
    )
    try:
        batch = trainer.workers.local_worker().sample()
    finally:
        trainer.stop()
    assert isinstance(batch, MultiAgentBatch)
    assert batch.env_steps() == 8
    a, b = batch.policy_batches["pa"], batch.policy_batches["pb"]
    # "a" acted at steps 0-4 (5 transitions), the last one terminated.
    assert a[SampleBatch.T].tolist() == [0, 1, 2, 3, 4]
    assert a[SampleBatch.OBS][:, 0].tolist() == [0, 1, 2, 3, 4]
    assert a[SampleBatch.NEXT_OBS][:, 0].tolist() == [1, 2, 3, 4, 5]
    assert a[SampleBatch.REWARDS].tolist() == [1.0] * 5
    assert a[SampleBatch.TERMINATEDS].tolist() == [False] * 4 + [True]
    # "b" joined with the observation of step 3 and acted at steps 3-7.
    assert b[SampleBatch.OBS][:, 0].tolist() == [3, 4, 5, 6, 7]
    assert b[SampleBatch.REWARDS].tolist() == [10.0] * 5
    assert b[SampleBatch.TERMINATEDS].tolist() == [False] * 4 + [True]
    assert set(a[SampleBatch.AGENT_INDEX]) == {0} and set(b[SampleBatch.AGENT_INDEX]) == {1}
    assert a[SampleBatch.EPS_ID][0] == b[SampleBatch.EPS_ID][0]
    for policy_batch in (a, b):
        assert SampleBatch.ADVANTAGES in policy_batch  # postprocessed (GAE)


class RecordingCallbacks(DefaultCallbacks):
    def on_episode_start(self, *, episode, **kwargs):
        episode.user_data["steps"] = 0

    def on_episode_step(self, *, episode, **kwargs):
        episode.user_data["steps"] += 1
        assert episode.last_action_for("a") is not None

    def on_episode_end(self, *, episode, **kwargs):
        episode.custom_metrics["steps_seen"] = episode.user_data["steps"]
        episode.custom_metrics["b_last_reward"] = episode.last_reward_for("b")
        episode.custom_metrics["b_last_obs_t"] = float(episode.last_observation_for("b")[0])

    def on_postprocess_trajectory(self, *, agent_id, original_batches, postprocessed_batch, **kw):
        postprocessed_batch["other_agents"] = np.full(
            postprocessed_batch.count, len(original_batches) - 1
        )


def test_episode_metrics_and_callbacks_see_every_agent():
    trainer = PPOTrainer(
        env=JoinLeaveEnv,
        config=small_config(
            num_envs_per_worker=1,
            rollout_fragment_length=8,
            train_batch_size=16,
            sgd_minibatch_size=16,
            batch_mode="complete_episodes",
            callbacks=RecordingCallbacks,
            multiagent={
                "policies": {"pa", "pb"},
                "policy_mapping_fn": lambda agent_id, episode, worker, **kw: f"p{agent_id}",
            },
        ),
    )
    try:
        batch = trainer.workers.local_worker().sample()
        result = trainer.train()
    finally:
        trainer.stop()
    assert batch.policy_batches["pa"]["other_agents"].tolist() == [1] * 5
    assert result["policy_reward_mean"] == {"pa": 5.0, "pb": 50.0}
    assert result["episode_reward_mean"] == 55.0
    assert set(result["hist_stats"]["policy_pb_reward"]) == {50.0}
    assert result["custom_metrics"]["steps_seen_mean"] == 7.0  # the last step ends it
    assert result["custom_metrics"]["b_last_reward_mean"] == 10.0
    assert result["custom_metrics"]["b_last_obs_t_mean"] == 8.0


def test_untrained_policy_stays_bit_identical_and_agent_steps_are_counted():
    trainer = PPOTrainer(
        env=TwoCartPoles,
        config=small_config(
            env_config={"num_agents": 2},
            multiagent=two_policy_multiagent(
                policies_to_train=["p0"], count_steps_by="agent_steps"
            ),
        ),
    )
    try:
        before = trainer.get_weights()
        result = trainer.train()
        after = trainer.get_weights()
    finally:
        trainer.stop()
    assert all(np.array_equal(before["p1"][k], after["p1"][k]) for k in before["p1"])
    assert any(not np.array_equal(before["p0"][k], after["p0"][k]) for k in before["p0"])
    assert list(result["info"]["learner"]) == ["p0"]  # p1 never trained
    # Two agents act per env step while both carts are up.
    assert result["timesteps_total"] == result["agent_timesteps_total"] >= 64
    assert result["num_env_steps_sampled"] < result["agent_timesteps_total"]


def test_policies_to_train_as_a_callable():
    trainer = PPOTrainer(
        env=TwoCartPoles,
        config=small_config(
            env_config={"num_agents": 2},
            multiagent=two_policy_multiagent(policies_to_train=lambda pid, batch=None: pid == "p1"),
        ),
    )
    try:
        before = trainer.get_weights(["p0"])
        result = trainer.train()
        assert all(
            np.array_equal(before["p0"][k], trainer.get_weights(["p0"])["p0"][k])
            for k in before["p0"]
        )
    finally:
        trainer.stop()
    assert list(result["info"]["learner"]) == ["p1"]
    assert result["timesteps_total"] == result["num_env_steps_sampled"] >= 64


def test_add_and_remove_policy_with_a_remote_worker():
    trainer = PPOTrainer(
        env=TwoCartPoles,
        config=small_config(
            num_workers=1,
            env_config={"num_agents": 2},
            multiagent=two_policy_multiagent(),
        ),
    )
    try:
        trainer.train()
        new = trainer.add_policy(
            "p2",
            type(trainer.get_policy("p0")),
            policy_mapping_fn=lambda agent_id, episode, worker, **kw: (
                "p2" if agent_id == 1 else "p0"
            ),
            policies_to_train=["p0", "p2"],
        )
        assert new is trainer.get_policy("p2")
        assert new.observation_space == TwoCartPoles({}).observation_space  # from the env
        remote_ids = trainer.workers.foreach_worker(lambda w: sorted(w.policy_map))
        assert remote_ids == [["p0", "p1", "p2"]] * 2
        before = trainer.get_weights(["p1", "p2"])
        trained = set()
        for _ in range(3):  # ongoing episodes finish with the old mapping first
            result = trainer.train()
            trained |= {
                pid
                for pid, info in result["info"]["learner"].items()
                if info["num_agent_steps_trained"] > 0
            }
        assert "p2" in result["policy_reward_mean"]
        assert trained == {"p0", "p2"}
        after = trainer.get_weights(["p1", "p2"])
        assert all(np.array_equal(before["p1"][k], after["p1"][k]) for k in before["p1"])
        assert (
            trainer.workers.remote_workers()[0]
            .apply(lambda w: w.is_policy_to_train("p2"))
            .result(30)
        )

        trainer.remove_policy(
            "p1",
            policy_mapping_fn=lambda agent_id, episode, worker, **kw: f"p{2 * agent_id}",
        )
        assert trainer.workers.foreach_worker(lambda w: sorted(w.policy_map)) == [["p0", "p2"]] * 2
        assert "p1" not in trainer.learner_group.local_learner.policy_ids
        trainer.train()
    finally:
        trainer.stop()


def map_agent_1_to_p2(agent_id, episode, worker, **kwargs):
    return "p2" if agent_id == 1 else "p0"


def test_recreated_worker_gets_the_policies_added_at_runtime():
    import os
    import signal

    trainer = PPOTrainer(
        env=TwoCartPoles,
        config=small_config(
            num_workers=1,
            recreate_failed_workers=True,
            env_config={"num_agents": 2},
            multiagent=two_policy_multiagent(),
        ),
    )
    try:
        trainer.add_policy(
            "p2",
            type(trainer.get_policy("p0")),
            policy_mapping_fn=map_agent_1_to_p2,
            policies_to_train=["p0", "p2"],
        )
        trainer.remove_policy("p1")
        old = trainer.workers.remote_workers()[0]
        os.kill(old.pid, signal.SIGKILL)
        result = trainer.train()
        new = trainer.workers.remote_workers()[0]
        assert new.pid != old.pid and result["num_healthy_workers"] == 1

        def describe(worker):
            return (
                sorted(worker.policy_map),
                worker.policy_mapping_fn(1, None, worker),
                [p for p in worker.policy_map if worker.is_policy_to_train(p)],
                worker.get_weights(["p2"]),
            )

        local, remote = trainer.workers.foreach_worker(describe)
        assert remote[:3] == (["p0", "p2"], "p2", ["p0", "p2"]) == local[:3]
        for k, v in local[3]["p2"].items():
            np.testing.assert_array_equal(remote[3]["p2"][k], v)
        assert "p2" in trainer.train()["policy_reward_mean"]
    finally:
        trainer.stop()


def test_restore_into_a_fresh_trainer_adds_the_policies_added_at_runtime(tmp_path):
    config = small_config(env_config={"num_agents": 2}, multiagent=two_policy_multiagent())
    trainer = PPOTrainer(env=TwoCartPoles, config=config)
    try:
        policy_cls = type(trainer.get_policy("p0"))
        trainer.add_policy(
            "p2",
            policy_cls,
            config={"lr": 1e-3},
            policy_mapping_fn=map_agent_1_to_p2,
            policies_to_train=["p2"],
        )
        trainer.train()
        path = trainer.save(str(tmp_path))
        saved = trainer.get_weights(["p2"])["p2"]
    finally:
        trainer.stop()
    fresh = PPOTrainer(env=TwoCartPoles, config=config)
    try:
        fresh.restore(path)
        p2 = fresh.get_policy("p2")
        assert type(p2) is policy_cls and p2.config["lr"] == 1e-3
        assert p2.observation_space == TwoCartPoles({}).observation_space
        restored = fresh.get_weights(["p2"])["p2"]
        assert restored.keys() == saved.keys()
        for k, v in saved.items():
            np.testing.assert_array_equal(restored[k], v)
        assert set(fresh.learner_group.local_learner.policy_ids) == {"p2"}
        # The mapping fn is not stored: the config's stays until it is set again.
        local = fresh.workers.local_worker()
        assert local.policy_mapping_fn(1, None, local) == "p1"
        fresh.set_policy_mapping_fn(map_agent_1_to_p2)
        # Running episodes finish with the old mapping first.
        assert any("p2" in fresh.train()["info"]["learner"] for _ in range(4))
    finally:
        fresh.stop()


def test_restore_asks_to_add_a_policy_whose_class_cannot_be_imported(tmp_path):
    from corral.tune.trainable import CheckpointError

    config = small_config(env_config={"num_agents": 2}, multiagent=two_policy_multiagent())
    trainer = PPOTrainer(env=TwoCartPoles, config=config)
    try:

        class LocalPolicy(type(trainer.get_policy("p0"))):
            pass

        trainer.add_policy("p2", LocalPolicy)
        path = trainer.save(str(tmp_path))
        saved = trainer.get_weights(["p2"])["p2"]
    finally:
        trainer.stop()
    fresh = PPOTrainer(env=TwoCartPoles, config=config)
    try:
        with pytest.raises(CheckpointError, match="inside a function.*add_policy"):
            fresh.restore(path)
        fresh.add_policy("p2", LocalPolicy)  # added by hand: restore loads its weights
        fresh.restore(path)
        for k, v in saved.items():
            np.testing.assert_array_equal(fresh.get_weights(["p2"])["p2"][k], v)
    finally:
        fresh.stop()


def test_compute_actions_maps_agents_to_their_policies():
    trainer = PPOTrainer(
        env=TwoCartPoles,
        config=small_config(env_config={"num_agents": 2}, multiagent=two_policy_multiagent()),
    )
    try:
        obs = {0: np.zeros(4, np.float32), 1: np.ones(4, np.float32)}
        actions = trainer.compute_actions(obs, policy_id=None, explore=False)
        assert set(actions) == {0, 1}
        for agent, pid in ((0, "p0"), (1, "p1")):
            expected = trainer.compute_single_action(obs[agent], policy_id=pid, explore=False)
            assert actions[agent] == expected
        _, states, extras = trainer.compute_actions(obs, policy_id=None, full_fetch=True)
        assert set(extras) == {"p0", "p1"} and states == {0: [], 1: []}
    finally:
        trainer.stop()


def test_dqn_lockstep_replay_trains_on_whole_env_steps():
    from collections import Counter

    from corral.agents.dqn import DQNTrainer

    config = {
        "env_config": {"num_agents": 2},
        "multiagent": two_policy_multiagent(replay_mode="lockstep"),
        "prioritized_replay": False,
        "min_iter_time_s": 0,
        "timesteps_per_iteration": 64,
        "learning_starts": 32,
        "rollout_fragment_length": 8,
        "train_batch_size": 16,
        "model": {"fcnet_hiddens": [8]},
        "hiddens": [8],
        "seed": 0,
    }
    with pytest.raises(ValueError, match="Lockstep replay mode is not supported with prio"):
        DQNTrainer(env=TwoCartPoles, config={**config, "prioritized_replay": True})
    trainer = DQNTrainer(env=TwoCartPoles, config=config)
    train_batches = []
    update = trainer.learner_group.update

    def recording_update(*args, **kwargs):
        train_batches.append(kwargs["batch"])
        return update(*args, **kwargs)

    trainer.learner_group.update = recording_update
    try:
        result = trainer.train()
    finally:
        trainer.stop()
    assert set(result["info"]["learner"]) == {"p0", "p1"}
    assert train_batches
    for batch in train_batches:
        p0, p1 = (
            Counter(zip(batch.policy_batches[p]["eps_id"], batch.policy_batches[p]["t"]))
            for p in ("p0", "p1")
        )
        shared = p0.keys() & p1.keys()
        # Both agents' rows of every env step at which both acted, as often as drawn.
        assert shared and all(p0[k] == p1[k] for k in shared)
        # One row per policy per drawn env step (each agent maps to its own policy).
        assert sum(max(p0[k], p1[k]) for k in p0.keys() | p1.keys()) == batch.env_steps()


def test_compute_actions_runs_one_batched_call_per_policy():
    trainer = PPOTrainer(
        env=TwoCartPoles,
        config=small_config(
            env_config={"num_agents": 5},
            multiagent=two_policy_multiagent(
                policy_mapping_fn=lambda agent_id, episode, worker, **kw: f"p{agent_id % 2}"
            ),
        ),
    )
    try:
        batch_sizes = {"p0": [], "p1": []}
        for pid, sizes in batch_sizes.items():
            policy = trainer.get_policy(pid)
            compute = policy.compute_actions_from_input_dict

            def counting(input_dict, *args, _compute=compute, _sizes=sizes, **kwargs):
                _sizes.append(len(input_dict["obs"]))
                return _compute(input_dict, *args, **kwargs)

            policy.compute_actions_from_input_dict = counting
        rng = np.random.default_rng(0)
        obs = {a: rng.normal(size=4).astype(np.float32) for a in range(5)}
        actions = trainer.compute_actions(obs, policy_id=None, explore=False)
        assert batch_sizes == {"p0": [3], "p1": [2]}
        assert list(actions) == list(obs)
        for agent, o in obs.items():
            expected = trainer.compute_single_action(o, policy_id=f"p{agent % 2}", explore=False)
            assert actions[agent] == expected
    finally:
        trainer.stop()


def _add_other_agents_count(agent_obs, worker, base_env, policies, episode, **kwargs):
    return {a: np.append(o, len(agent_obs)).astype(np.float32) for a, o in agent_obs.items()}


class AddOtherAgentsCount(ObservationFunction):
    def __call__(self, agent_obs, worker, base_env, policies, episode, **kwargs):
        return _add_other_agents_count(agent_obs, worker, base_env, policies, episode)


@pytest.mark.parametrize(
    "add_other_agents_count",
    [_add_other_agents_count, AddOtherAgentsCount, AddOtherAgentsCount()],
    ids=["function", "ObservationFunction-subclass", "ObservationFunction-instance"],
)
def test_observation_fn_rewrites_observations(add_other_agents_count):

    wide = gym.spaces.Box(-10.0, 10.0, (3,), np.float32)
    trainer = PPOTrainer(
        env=JoinLeaveEnv,
        config=small_config(
            num_envs_per_worker=1,
            rollout_fragment_length=8,
            batch_mode="complete_episodes",
            multiagent={
                "policies": {"shared": (None, wide, ACT, {})},
                "policy_mapping_fn": lambda agent_id, episode, worker, **kw: "shared",
                "observation_fn": add_other_agents_count,
            },
        ),
    )
    try:
        batch = trainer.workers.local_worker().sample()
    finally:
        trainer.stop()
    shared = batch.policy_batches["shared"]
    assert shared[SampleBatch.OBS].shape == (10, 3)
    # Trajectories are contiguous per agent: "a" (alone, then with "b"), then "b".
    assert shared[SampleBatch.AGENT_INDEX].tolist() == [0] * 5 + [1] * 5
    # How many agents observed at each of their steps ("a" leaves with a final obs at 5).
    assert shared[SampleBatch.OBS][:, 2].tolist() == [1, 1, 1, 2, 2] + [2, 2, 2, 1, 1]


def test_unknown_policy_from_mapping_fn_is_a_clear_error():
    with pytest.raises(KeyError, match="nope"):
        PPOTrainer(
            env=TwoCartPoles,
            config=small_config(
                env_config={"num_agents": 2},
                multiagent={
                    "policies": {"p0": (None, OBS, ACT, {})},
                    "policy_mapping_fn": lambda agent_id, episode, worker, **kw: "nope",
                },
            ),
        ).workers.local_worker().sample()


# -- PettingZoo ---------------------------------------------------------------------


def test_pettingzoo_aec_env_takes_turns_and_pays_every_agent():
    pytest.importorskip("pettingzoo")
    from pettingzoo.classic import tictactoe_v3

    env = PettingZooEnv(tictactoe_v3.env())
    obs, _ = env.reset(seed=0)
    assert list(obs) == ["player_1"]
    moves = [0, 3, 1, 4, 2]  # player_1 takes the top row
    for move in moves:
        (agent,) = obs
        obs, rewards, terminateds, truncateds, _ = env.step({agent: move})
    assert rewards == {"player_2": -1.0, "player_1": 1.0}
    assert terminateds == {"player_2": True, "player_1": True, "__all__": True}
    assert not truncateds["__all__"]


def test_pettingzoo_parallel_env_trains_a_shared_policy():
    pytest.importorskip("mpe2")
    from mpe2 import simple_spread_v3

    from corral.tune.registry import register_env

    register_env(
        "spread",
        lambda ctx: PettingZooEnv(
            simple_spread_v3.parallel_env(N=2, max_cycles=10, continuous_actions=False)
        ),
    )
    trainer = PPOTrainer(
        env="spread",
        config=small_config(
            multiagent={
                "policies": {"shared"},
                "policy_mapping_fn": lambda agent_id, episode, worker, **kw: "shared",
            },
        ),
    )
    try:
        result = trainer.train()
    finally:
        trainer.stop()
    assert result["episodes_this_iter"] >= 6  # 10-step episodes, 2 envs x 16 steps x 2
    assert set(result["policy_reward_mean"]) == {"shared"}
    assert result["episode_len_mean"] == 10
