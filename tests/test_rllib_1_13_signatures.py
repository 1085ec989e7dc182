"""RLlib 1.13's keyword names and methods that corral's classes and functions of the same
module paths answer to: each call below uses 1.13's keywords (or method) and checks the
result; corral's own names and positional calls keep working."""

from __future__ import annotations

import operator

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.env.base_env import convert_to_base_env
from corral.env.multi_agent_env import MultiAgentEnv, MultiAgentEnvWrapper, make_multi_agent
from corral.env.vector_env import VectorEnv, VectorEnvWrapper
from corral.policy.sample_batch import SampleBatch

# -- env ---------------------------------------------------------------------------


class _Counter(gym.Env):
    """Observes its step count; action 1 ends the episode; records the actions."""

    observation_space = gym.spaces.Box(0.0, 100.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(4)

    def __init__(self) -> None:
        self.t = 0
        self.actions: list = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        self.actions.append(int(action))
        return np.array([self.t], np.float32), 1.0, action == 1, False, {}


def _two_agents():
    return make_multi_agent(lambda cfg: _Counter())({"num_agents": 2})


def test_get_sub_environments_as_dict_maps_env_ids_to_sub_envs():
    ma = MultiAgentEnvWrapper([_two_agents(), _two_agents()])
    envs = ma.get_sub_environments()
    assert ma.get_sub_environments(as_dict=True) == {0: envs[0], 1: envs[1]}
    assert ma.get_sub_environments(as_dict=False) is envs
    vectorized = convert_to_base_env(_Counter(), lambda i: _Counter(), num_envs=3)
    subs = vectorized.get_sub_environments()
    assert vectorized.get_sub_environments(as_dict=True) == dict(enumerate(subs))

    class _Vec(VectorEnv):
        def __init__(self):
            super().__init__(_Counter.observation_space, _Counter.action_space, 2)
            self.envs = [_Counter(), _Counter()]

        def get_sub_environments(self):
            return self.envs

    wrapper = VectorEnvWrapper(_Vec())
    views = wrapper.get_sub_environments()
    assert len(views) == 2
    assert wrapper.get_sub_environments(as_dict=True) == {0: views[0], 1: views[1]}


def test_external_and_batched_base_envs_get_sub_environments_as_dict():
    from corral.env.external_env import ExternalEnv, ExternalEnvWrapper
    from corral.env.native_vector_env import BatchedVectorEnv

    class _Idle(ExternalEnv):
        def run(self):
            return None

    external = _Idle(_Counter.action_space, _Counter.observation_space)
    wrapper = ExternalEnvWrapper(external)
    assert wrapper.get_sub_environments(as_dict=True) == {0: external}
    assert wrapper.get_sub_environments() == [external]
    batched = BatchedVectorEnv(gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2))
    try:
        views = batched.get_sub_environments()
        assert batched.get_sub_environments(as_dict=True) == {0: views[0], 1: views[1]}
    finally:
        batched.stop()


def test_remote_base_env_get_sub_environments_as_dict():
    from corral.env.remote_base_env import RemoteBaseEnv

    env = RemoteBaseEnv(lambda i: _Counter(), 2, False, 0)
    try:
        handles = env.get_sub_environments()
        assert env.get_sub_environments(as_dict=True) == {0: handles[0], 1: handles[1]}
    finally:
        env.stop()


def test_multi_agent_env_render_mode_and_step_action_dict():
    env = MultiAgentEnv()
    assert env.render(mode="human") is None  # RLlib 1.13's default renders nothing
    assert env.render() is None
    with pytest.raises(NotImplementedError):
        env.step(action_dict={0: 1})
    # A subclass's step is called by 1.13's keyword too.
    two = _two_agents()
    two.reset(seed=0)
    obs, rewards, *_ = two.step(action_dict={0: 0, 1: 0})
    assert rewards == {0: 1.0, 1: 1.0}


def test_a_multi_agent_env_without_a_render_of_its_own_is_not_rendered():
    from corral.env.remote_vector_env import can_render

    # `MultiAgentEnv.render` (1.13's default) renders nothing: `render_env` skips such envs.
    assert not can_render(_two_agents())

    class _Drawn(MultiAgentEnv):
        def render(self, mode=None):
            return np.zeros((2, 2, 3), np.uint8)

    assert can_render(_Drawn())


def test_multi_agent_env_wrapper_is_built_from_make_env_existing_envs_and_num_envs():
    first = _two_agents()
    made = []

    def make_env(index):
        made.append(index)
        return _two_agents()

    ma = MultiAgentEnvWrapper(make_env, [first], 3)
    assert made == [1, 2] and ma.num_envs == 3 and ma.get_sub_environments()[0] is first
    assert MultiAgentEnvWrapper(make_env=make_env, existing_envs=[], num_envs=1).num_envs == 1
    with pytest.raises(ValueError, match="make_env"):
        MultiAgentEnvWrapper(None, [first], 2)
    # The asynchronous interface: no reward before the first step; an ended sub-env takes
    # no action until `try_reset`.
    obs, rewards, dones, _, _ = ma.poll()
    assert rewards == {0: {}, 1: {}, 2: {}} and dones[0] == {"__all__": False}
    ended = {0: 1, 1: 1}  # action 1 ends each agent's episode
    ma.send_actions({i: ended for i in range(3)})
    assert all(d["__all__"] for d in ma.poll()[2].values())
    with pytest.raises(ValueError, match="Env 0 is already done"):
        ma.send_actions({i: ended for i in range(3)})
    for i in range(3):
        assert sorted(ma.try_reset(i)[i]) == [0, 1]
    ma.send_actions({i: {0: 0, 1: 0} for i in range(3)})
    assert ma.poll()[1][2] == {0: 1.0, 1: 1.0}


def test_multi_agent_sub_envs_step_only_where_send_actions_has_an_entry():
    # RLlib 1.13: the others (one that ended, say) are not stepped and poll empty dicts.
    ma = MultiAgentEnvWrapper(lambda i: _two_agents(), [], 3)
    ma.poll()
    ma.send_actions({0: {0: 1, 1: 1}, 1: {0: 0, 1: 0}, 2: {0: 0, 1: 0}})  # env 0 ends
    assert ma.poll()[2][0]["__all__"]
    ma.send_actions({1: {0: 0, 1: 0}, 2: {0: 0, 1: 0}})  # without env 0: no try_reset needed
    obs, rewards, dones, infos, _ = ma.poll()
    assert obs[0] == rewards[0] == infos[0] == {} and dones[0] == {"__all__": False}
    assert rewards[1] == {0: 1.0, 1: 1.0} and set(obs[2]) == {0, 1}
    with pytest.raises(ValueError, match="Env 0 is already done"):  # still ended
        ma.send_actions({0: {0: 0, 1: 0}})
    with pytest.raises(ValueError, match="no sub-env 3"):
        ma.send_actions({3: {0: 0, 1: 0}})
    ma.try_reset(0)
    ma.send_actions({0: {0: 0, 1: 0}})
    rewards = ma.poll()[1]
    assert rewards[0] == {0: 1.0, 1: 1.0} and rewards[1] == rewards[2] == {}


def test_multi_agent_env_wrapper_space_samples_take_agent_ids():
    two = _two_agents()
    ma = MultiAgentEnvWrapper([two])
    sample = ma.action_space_sample(agent_ids=[1])
    assert list(sample) == [0] and list(sample[0]) == [1]
    assert two.action_space.contains(sample[0][1])
    obs = ma.observation_space_sample(agent_ids=[0, 1])
    assert sorted(obs[0]) == [0, 1]
    # corral's (and BaseEnv's) own name, and positional calls.
    assert list(ma.action_space_sample(agent_id=[0])[0]) == [0]
    assert list(ma.action_space_sample([1])[0]) == [1]
    with pytest.raises(TypeError, match="both"):
        ma.action_space_sample(agent_id=[0], agent_ids=[1])


def test_atari_wrappers_take_1_13_argument_names():
    from corral.env.wrappers.atari_wrappers import FireResetEnv, NoopResetEnv, WarpFrame

    for wrapper_cls in (FireResetEnv, NoopResetEnv):
        env = wrapper_cls(_Counter())
        env.reset(seed=0)
        before = list(env.unwrapped.actions)
        obs, reward, terminated, truncated, _ = env.step(ac=3)
        assert env.unwrapped.actions == [*before, 3] and reward == 1.0 and not terminated
        env.step(action=2)  # gymnasium's name
        env.step(0)
        assert env.unwrapped.actions[-2:] == [2, 0]

    class _Rgb(gym.Env):
        observation_space = gym.spaces.Box(0, 255, (20, 20, 3), np.uint8)
        action_space = gym.spaces.Discrete(2)

    warp = WarpFrame(_Rgb(), 8)
    frame = np.random.default_rng(0).integers(0, 255, (20, 20, 3), dtype=np.uint8)
    out = warp.observation(frame=frame)
    assert out.shape == (8, 8, 1) and out.dtype == np.uint8
    np.testing.assert_array_equal(out, warp.observation(frame))
    np.testing.assert_array_equal(out, warp.observation(observation=frame))


def test_dm_env_render_mode():
    import dm_env
    from dm_env import specs

    from corral.env.wrappers.dm_env_wrapper import DMEnv

    class _Still(dm_env.Environment):
        def observation_spec(self):
            return specs.Array((2, 2, 3), np.uint8, name="pixels")

        def action_spec(self):
            return specs.DiscreteArray(2, name="action")

        def reset(self):
            return dm_env.restart(np.full((2, 2, 3), 7, np.uint8))

        def step(self, action):
            return dm_env.transition(0.0, np.full((2, 2, 3), 7, np.uint8))

    env = DMEnv(_Still())
    env.reset()
    np.testing.assert_array_equal(env.render(mode="rgb_array"), np.full((2, 2, 3), 7))
    np.testing.assert_array_equal(env.render(), np.full((2, 2, 3), 7))
    with pytest.raises(ValueError, match="'rgb_array' frames only, not 'human'"):
        env.render(mode="human")


def test_open_spiel_env_render_mode_and_step_action(capsys):
    from corral.env.wrappers.open_spiel import OpenSpielEnv

    env = OpenSpielEnv("tic_tac_toe")
    env.reset(seed=0)
    env.step(action={0: 4})  # RLlib 1.13's name of the action dict
    env.step(action_dict={1: 0})
    text = env.render()
    assert "x" in text and "o" in text
    assert env.render(mode="ansi") == text
    assert env.render(mode="human") is None
    assert capsys.readouterr().out.strip() == text.strip()
    with pytest.raises(ValueError, match="not 'rgb_array'"):
        env.render(mode="rgb_array")


def test_pettingzoo_env_render_mode_and_step_action():
    from pettingzoo.classic import rps_v2

    from corral.env.wrappers.pettingzoo_env import ParallelPettingZooEnv, PettingZooEnv

    env = PettingZooEnv(rps_v2.env(render_mode="rgb_array"))
    obs, _ = env.reset(seed=0)
    (agent,) = obs
    next_obs, *_ = env.step(action={agent: 0})  # RLlib 1.13's name
    assert agent not in next_obs and len(next_obs) == 1
    frame = env.render(mode="rgb_array")
    assert frame.ndim == 3 and frame.dtype == np.uint8
    assert env.render().shape == frame.shape
    with pytest.raises(ValueError, match="render_mode='rgb_array'"):
        env.render(mode="human")
    parallel = ParallelPettingZooEnv(rps_v2.parallel_env(render_mode="rgb_array"))
    obs, _ = parallel.reset(seed=0)
    _, rewards, *_ = parallel.step(action_dict=dict.fromkeys(obs, 1))
    assert set(rewards) == set(obs)
    assert parallel.render(mode="rgb_array").shape == frame.shape


def test_recsim_observation_wrappers_take_obs():
    from corral.env.recommender_system import InterestEvolutionEnv
    from corral.env.wrappers.recsim import (
        RecSimObservationBanditWrapper,
        RecSimObservationSpaceWrapper,
        RecSimResetWrapper,
    )

    raw_env = RecSimResetWrapper(InterestEvolutionEnv({"num_candidates": 4, "seed": 0}))
    spaced = RecSimObservationSpaceWrapper(raw_env)
    raw, _ = raw_env.reset(seed=0)
    by_obs = spaced.observation(obs=raw)
    assert list(by_obs["doc"]) == ["0", "1", "2", "3"]
    np.testing.assert_array_equal(by_obs["doc"]["3"], spaced.observation(raw)["doc"]["3"])
    bandit = RecSimObservationBanditWrapper(spaced)
    stacked = bandit.observation(obs=by_obs)
    assert stacked["item"].shape[0] == 4
    np.testing.assert_array_equal(stacked["item"], bandit.observation(observation=by_obs)["item"])


# -- evaluation ------------------------------------------------------------------------


def _worker():
    from corral.agents.pg.pg_torch_policy import PGTorchPolicy
    from corral.evaluation.rollout_worker import RolloutWorker

    return RolloutWorker(
        env_creator=lambda ctx: gym.make("CartPole-v1"),
        policy_spec=PGTorchPolicy,
        rollout_fragment_length=20,
        policy_config={"lr": 0.01, "model": {"fcnet_hiddens": [8]}},
        seed=0,
    )


def test_rollout_worker_compute_gradients_single_agent_and_restore_objs():
    worker = _worker()
    try:
        batch = worker.sample()
        grads, info = worker.compute_gradients(batch, single_agent=True)
        assert isinstance(grads, list) and any(isinstance(g, np.ndarray) for g in grads)
        assert info["batch_count"] == batch.count
        per_policy, infos = worker.compute_gradients(batch, single_agent=False)
        assert list(per_policy) == ["default_policy"] and infos["batch_count"] == batch.count
        for a, b in zip(per_policy["default_policy"], grads, strict=True):
            assert (a is None) == (b is None)
            if a is not None:
                np.testing.assert_allclose(a, b)
        # corral's own form (by the batch's type) is unchanged.
        plain, plain_info = worker.compute_gradients(batch)
        assert isinstance(plain, list) and "batch_count" not in plain_info

        saved = worker.save()
        before = worker.get_weights()
        worker.apply_gradients(grads)
        assert any(
            not np.allclose(before["default_policy"][k], v)
            for k, v in worker.get_weights()["default_policy"].items()
        )
        worker.restore(objs=saved)
        for k, v in worker.get_weights()["default_policy"].items():
            np.testing.assert_allclose(before["default_policy"][k], v)
        worker.restore(state=saved)  # the `set_state` name
        worker.restore(saved)
    finally:
        worker.stop()


def test_multi_agent_sample_batch_builder_check_missing_dones():
    from corral.evaluation.sample_batch_builder import MultiAgentSampleBatchBuilder

    builder = MultiAgentSampleBatchBuilder({"p": None}, False, None)
    builder.add_values(0, "p", obs=1.0, dones=False)
    builder.add_values(0, "p", obs=2.0, dones=True)
    builder.add_values(1, "p", obs=1.0, terminateds=False, truncateds=True)
    builder.check_missing_dones()
    builder.add_values(2, "p", obs=1.0, dones=False)
    with pytest.raises(ValueError, match="no last observation of agent 2 \\(policy 'p'\\)"):
        builder.check_missing_dones()


# -- execution ------------------------------------------------------------------------


def test_segment_tree_1_13_constructor_and_ranges():
    from corral.utils.replay_buffers.segment_tree import (
        MinSegmentTree,
        SegmentTree,
        SumSegmentTree,
    )

    values = np.random.default_rng(0).random(64)
    tree = SegmentTree(capacity=64, operation=operator.add, neutral_element=0.0)
    tree[np.arange(64)] = values
    assert tree.reduce(start=3, end=40) == pytest.approx(values[3:40].sum())
    assert tree.reduce(start=0, end=-1) == pytest.approx(values[:-1].sum())
    assert tree.reduce(5, 5) == 0.0
    assert tree.neutral_element == 0.0
    maxima = SegmentTree(64, max)  # the neutral element found as 1.13's: -inf
    assert maxima.reduce() == -np.inf
    maxima[np.arange(64)] = values
    assert maxima.reduce(10, 20) == values[10:20].max()
    products = SegmentTree(8, lambda a, b: a * b, 1.0)  # any two-argument callable
    products[np.arange(8)] = np.arange(1.0, 9.0)
    assert products.reduce() == 40320.0 and products.reduce(start=1, end=4) == 24.0
    # corral's older names.
    assert SegmentTree(8, op=np.minimum, neutral=np.inf).reduce() == np.inf

    total = SumSegmentTree(256)
    total[np.arange(256)] = np.arange(256.0)
    assert total.sum(start=10, end=20) == sum(range(10, 20))
    assert total.sum() == sum(range(256))
    low = MinSegmentTree(256)
    low[np.arange(256)] = 256.0 - np.arange(256.0)
    assert low.min(start=0, end=100) == 157.0 and low.min() == 1.0


def test_segment_tree_get_state_and_set_state():
    from corral.utils.replay_buffers.segment_tree import MinSegmentTree, SumSegmentTree

    tree = SumSegmentTree(8)
    tree[np.arange(5)] = [1.0, 2.0, 3.0, 4.0, 5.0]
    state = tree.get_state()
    # RLlib 1.13's layout: the leaves last, a binary tree of sums before them.
    assert len(state) == 16 and state[8:] == [1.0, 2.0, 3.0, 4.0, 5.0, 0.0, 0.0, 0.0]
    assert state[1] == 15.0 and state[2] == 10.0 and state[3] == 5.0 and state[4] == 3.0
    fresh = SumSegmentTree(8)
    fresh.set_state(state)
    assert fresh.sum() == 15.0 and fresh.sum(1, 3) == 5.0
    assert int(fresh.find_prefixsum_idx(np.array([9.5]))[0]) == 3
    low = MinSegmentTree(8)
    low[2] = 0.5
    again = MinSegmentTree(8)
    again.set_state(low.get_state())
    assert again.min() == 0.5 and again.min(3, 8) == np.inf
    with pytest.raises(ValueError, match="does not fit capacity 8"):
        again.set_state([1.0] * 5)


def test_replay_buffer_host_apply_and_instance_for_testing():
    import platform

    from corral.execution.buffers.mixin_replay_buffer import MixInMultiAgentReplayBuffer
    from corral.execution.buffers.multi_agent_replay_buffer import MultiAgentReplayBuffer

    buffer = MultiAgentReplayBuffer(learning_starts=0, capacity=100)
    assert MultiAgentReplayBuffer.get_instance_for_testing() is buffer
    assert buffer.get_host() == platform.node()
    buffer.add_batch(SampleBatch({"obs": np.arange(4.0), "rewards": np.ones(4)}))
    assert buffer.apply(lambda b, k, scale=1: b.num_added * k * scale, 2, scale=3) == 24
    assert MixInMultiAgentReplayBuffer(4, 0.5).get_host() == platform.node()


# -- models ---------------------------------------------------------------------------


def test_torch_action_distributions_logp_x():
    from corral.models.torch.torch_action_dist import (
        TorchBeta,
        TorchCategorical,
        TorchDiagGaussian,
        TorchDirichlet,
        TorchMultiActionDistribution,
        TorchSlateMultiCategorical,
        TorchSquashedGaussian,
    )

    torch.manual_seed(0)
    box = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    dists = [
        TorchBeta(torch.randn(3, 4), None, low=-1.0, high=1.0),
        TorchSquashedGaussian(torch.randn(3, 4), None, low=-1.0, high=1.0),
        TorchDirichlet(torch.rand(3, 3) + 0.5, None),
        TorchSlateMultiCategorical(
            torch.randn(3, 4),
            None,
            action_space=gym.spaces.MultiDiscrete([4, 4]),
            all_slates=torch.tensor([[0, 1], [1, 2], [2, 3], [3, 0]]),
        ),
        TorchMultiActionDistribution(
            torch.randn(3, 6),
            None,
            child_distributions=[TorchCategorical, TorchDiagGaussian],
            input_lens=[2, 4],
            action_space=gym.spaces.Tuple([gym.spaces.Discrete(2), box]),
        ),
    ]
    for dist in dists:
        x = dist.sample()
        expected = dist.logp(x)
        torch.testing.assert_close(dist.logp(x=x), expected)
        torch.testing.assert_close(dist.logp(actions=x), expected)


def test_noisy_layer_forward_inputs():
    from corral.models.torch.modules.noisy_layer import NoisyLayer

    layer = NoisyLayer(3, 2, sigma0=0.0, activation=None)  # no noise: deterministic
    x = torch.ones(4, 3)
    torch.testing.assert_close(layer(inputs=x), layer(x))
    torch.testing.assert_close(layer.forward(inputs=x), layer(x=x))


# -- policy ---------------------------------------------------------------------------


def _sequences() -> SampleBatch:
    return SampleBatch(
        {
            "obs": np.arange(10.0),
            "state_in_0": np.array([[0.0], [10.0], [20.0]]),
            "seq_lens": np.array([4, 3, 3], np.int32),
        }
    )


def test_sample_batch_right_zero_pad_exclude_states():
    # exclude_states=False: state columns of one row per step are padded too.
    rows = SampleBatch(
        {"t": np.array([1, 2, 3]), "state_in_0": np.array([7, 8, 9]), "seq_lens": [1, 2]}
    )
    rows.right_zero_pad(2, exclude_states=False)
    assert rows["t"].tolist() == [1, 0, 2, 3] and rows["state_in_0"].tolist() == [7, 0, 8, 9]
    kept = _sequences()
    kept.right_zero_pad(max_seq_len=4, exclude_states=True)
    assert kept["state_in_0"].shape == (3, 1) and kept.zero_padded
    with pytest.raises(TypeError, match="both"):
        _sequences().right_zero_pad(4, exclude_states=True, exclude_states_and_seq_lens=True)


def test_sample_batch_slice_state_start_end():
    batch = _sequences()
    part = batch.slice(4, 9, state_start=1, state_end=3)
    np.testing.assert_array_equal(part["obs"], [4.0, 5.0, 6.0, 7.0, 8.0])
    np.testing.assert_array_equal(part["state_in_0"], [[10.0], [20.0]])
    np.testing.assert_array_equal(part["seq_lens"], [3, 2])  # the last cut to the rows taken
    whole = batch.slice(0, 4, 0, 1)
    np.testing.assert_array_equal(whole["seq_lens"], [4])
    np.testing.assert_array_equal(whole["state_in_0"], [[0.0]])
    with pytest.raises(ValueError, match="give both"):
        batch.slice(0, 4, state_start=0)
    with pytest.raises(ValueError, match="hold 4 rows, the slice 7"):
        batch.slice(0, 7, 0, 1)
    # Without sequences the state bounds change nothing.
    plain = SampleBatch({"obs": np.arange(5.0)})
    np.testing.assert_array_equal(plain.slice(1, 3, 0, 1)["obs"], [1.0, 2.0])


def test_qmix_policy_set_epsilon_is_kept_in_its_state():
    from corral.agents.qmix.qmix import DEFAULT_CONFIG
    from corral.agents.qmix.qmix_policy import QMixTorchPolicy

    agent = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    policy = QMixTorchPolicy(
        gym.spaces.Tuple([agent, agent]),
        gym.spaces.Tuple([gym.spaces.Discrete(2)] * 2),
        dict(DEFAULT_CONFIG),
    )
    assert policy.cur_epsilon == 1.0
    policy.set_epsilon(0.25)
    assert policy.cur_epsilon == 0.25
    state = policy.get_state()
    policy.set_epsilon(0.9)
    policy.set_state(state)
    assert policy.cur_epsilon == 0.25


# -- offline --------------------------------------------------------------------------


class _QuarterPolicy:
    """log pi(a | s) = log(1/4) for every action."""

    config = {"gamma": 0.5}

    def compute_log_likelihoods(self, actions, obs_batch):
        return torch.full((len(actions),), float(np.log(0.25)))


def test_off_policy_estimator_action_prob_and_create():
    from corral.offline.estimators.importance_sampling import ImportanceSampling

    class _Worker:
        def get_policy(self, policy_id="default_policy"):
            return _QuarterPolicy()

    class _IOContext:
        worker = _Worker()

    estimator = ImportanceSampling.create(_IOContext())
    assert isinstance(estimator, ImportanceSampling) and estimator.gamma == 0.5
    batch = SampleBatch({"obs": np.zeros((3, 2)), "actions": np.array([0, 1, 2])})
    np.testing.assert_allclose(estimator.action_prob(batch), [0.25, 0.25, 0.25])


# -- utils ----------------------------------------------------------------------------


def test_compression_numpy_and_from_config_keywords():
    from corral.utils.compression import is_compressed, pack, unpack
    from corral.utils.from_config import lookup_type
    from corral.utils.numpy import convert_to_numpy
    from corral.utils.replay_buffers import PrioritizedReplayBuffer, ReplayBuffer

    packed = pack(data=np.arange(6.0).reshape(2, 3))
    assert is_compressed(data=packed) and not is_compressed(data=np.zeros(2))
    np.testing.assert_array_equal(unpack(packed), np.arange(6.0).reshape(2, 3))
    assert lookup_type(ReplayBuffer, type_="PrioritizedReplayBuffer") is PrioritizedReplayBuffer
    assert lookup_type(ReplayBuffer, type_name="prioritized_replay_buffer") is (
        PrioritizedReplayBuffer
    )
    x = {"a": torch.ones(2, dtype=torch.float64)}
    assert convert_to_numpy(x, reduce_floats=False)["a"].dtype == np.float64
    assert convert_to_numpy(x, reduce_floats=True)["a"].dtype == np.float32
    assert convert_to_numpy(x)["a"].dtype == np.float32


def test_explorations_take_a_session_argument():
    from corral.utils.exploration import (
        EpsilonGreedy,
        Exploration,
        GaussianNoise,
        OrnsteinUhlenbeckNoise,
        ParameterNoise,
    )

    box = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    explorations = [
        Exploration(gym.spaces.Discrete(2)),
        EpsilonGreedy(gym.spaces.Discrete(2)),
        GaussianNoise(box),
        OrnsteinUhlenbeckNoise(box),
        ParameterNoise(gym.spaces.Discrete(2), model=torch.nn.Linear(3, 2)),
    ]
    from corral.agents.ppo import DEFAULT_CONFIG
    from corral.agents.ppo.ppo_torch_policy import PPOTorchPolicy

    curious = PPOTorchPolicy(
        gym.spaces.Box(0.0, 1.0, (4,), np.float32),
        gym.spaces.Discrete(2),
        {
            **DEFAULT_CONFIG,
            "num_workers": 0,
            "model": {"fcnet_hiddens": [8]},
            "exploration_config": {
                "type": "Curiosity",
                "feature_dim": 4,
                "inverse_net_hiddens": [8],
                "forward_net_hiddens": [8],
                "sub_exploration": {"type": "StochasticSampling"},
            },
        },
    )
    explorations.append(curious.exploration)
    for exploration in explorations:
        state = exploration.get_state(sess=None)
        assert state == exploration.get_state()
        exploration.set_state(state, sess=None)
        assert isinstance(exploration.get_info(sess=None), dict)


def test_random_exploration_get_torch_exploration_action():
    from corral.models.torch.torch_action_dist import TorchCategorical
    from corral.utils.exploration import Random

    random = Random(gym.spaces.Discrete(3))
    dist = TorchCategorical(torch.tensor([[0.0, 5.0, 0.0]] * 64))
    actions, logp = random.get_torch_exploration_action(dist, explore=True)
    assert actions.shape == (64,) and set(actions.tolist()) == {0, 1, 2}
    torch.testing.assert_close(logp, torch.zeros(64))
    greedy, _ = random.get_torch_exploration_action(action_dist=dist, explore=False)
    assert greedy.tolist() == [1] * 64


def test_filter_manager_synchronize_remotes():
    from corral.evaluation.backend import Future
    from corral.utils.filter import FilterManager, MeanStdFilter

    class _Handle:
        def __init__(self, rows):
            self.filters = {"p": MeanStdFilter((1,))}
            self.filters["p"](rows)

        def call(self, method, *args, **kwargs):
            future = Future()
            if method == "get_filters":
                out = {k: f.as_serializable() for k, f in self.filters.items()}
                for f in self.filters.values():
                    f.clear_buffer()
            else:
                out = [self.filters[k].sync(f) for k, f in args[0].items()]
            future._set(out)
            return future

    local = {"p": MeanStdFilter((1,))}
    remotes = [_Handle(np.array([[1.0], [3.0]])), _Handle(np.array([[5.0]]))]
    FilterManager.synchronize(local_filters=local, remotes=remotes, update_remote=True)
    assert local["p"].running_stats.n == 3
    assert all(r.filters["p"].running_stats.n == 3 for r in remotes)


def test_flexdict_assert_space():
    from corral.utils.spaces.flexdict import FlexDict

    space = FlexDict({})
    space.assertSpace(gym.spaces.Discrete(2))
    with pytest.raises(TypeError, match="gymnasium spaces"):
        space.assertSpace(3)
    space["a"] = gym.spaces.Discrete(2)
    with pytest.raises(TypeError, match="gymnasium spaces"):
        space["b"] = "not a space"


def test_a_base_env_of_one_s_own_has_no_sub_environments_by_default():
    from corral.env.base_env import BaseEnv

    class Own(BaseEnv):  # (RLlib 1.13: a BaseEnv need not hold gym envs)
        pass

    assert Own().get_sub_environments() == []
    assert Own().get_sub_environments(as_dict=True) == {}


def test_torch_policy_learn_on_batch_takes_policy_s_keyword_samples():
    from corral.agents.pg import DEFAULT_CONFIG, PGTorchPolicy

    policy = PGTorchPolicy(
        gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(2), dict(DEFAULT_CONFIG)
    )
    batch = SampleBatch(
        {
            "obs": np.zeros((4, 4), np.float32),
            "actions": np.zeros(4, np.int64),
            "rewards": np.ones(4, np.float32),
            "advantages": np.ones(4, np.float32),
        }
    )
    # (RLlib 1.13's Policy and QMix name it `samples`, its TorchPolicy `postprocessed_batch`.)
    assert "learner_stats" in policy.learn_on_batch(samples=batch)
    assert "learner_stats" in policy.learn_on_batch(postprocessed_batch=batch)


def test_ppo_extra_grad_process_takes_local_optimizer():
    import inspect

    from corral.agents.ppo.ppo_torch_policy import PPOTorchPolicy

    params = list(inspect.signature(PPOTorchPolicy.extra_grad_process).parameters)
    assert params[1:] == ["local_optimizer", "loss"]  # (RLlib 1.13's PPO names)
