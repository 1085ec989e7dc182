"""DeepMind envs as Gymnasium envs: `DMEnv` (any `dm_env`), `DMCEnv` (dm_control's suite)
and the suite's env creators (`corral.env.dm_control_suite`)."""

from __future__ import annotations

import importlib.util
import inspect
import os
import subprocess
import sys
import textwrap
import warnings

import gymnasium as gym
import numpy as np
import pytest

dm_env = pytest.importorskip("dm_env", reason="dm_env comes with the `dm-control` extra")
from dm_env import specs  # noqa: E402

from corral.env.wrappers.dm_env_wrapper import DMEnv, spec_to_space  # noqa: E402


class _Countdown(dm_env.Environment):
    """Observes a counter and a flag; action 1 ends the episode in a terminal state,
    action 0 steps on until a time limit of 4 steps truncates it."""

    def __init__(self) -> None:
        self._t = 0

    def observation_spec(self):
        return {
            "t": specs.BoundedArray((), np.int64, 0, 10, name="t"),
            "flag": specs.Array((2,), np.float32, name="flag"),
        }

    def action_spec(self):
        return specs.DiscreteArray(2, name="action")

    def _obs(self):
        return {"t": self._t, "flag": [self._t % 2, 1.0]}

    def reset(self):
        self._t = 0
        return dm_env.restart(self._obs())

    def step(self, action):
        self._t += 1
        if action == 1:
            return dm_env.termination(reward=-1.0, observation=self._obs())
        if self._t >= 4:
            return dm_env.truncation(reward=1.0, observation=self._obs(), discount=1.0)
        return dm_env.transition(reward=0.5, observation=self._obs())


def test_specs_become_spaces():
    space = spec_to_space(
        {
            "a": specs.DiscreteArray(5),
            "b": specs.BoundedArray((2,), np.float32, [-1.0, 0.0], 1.0),
            "c": specs.Array((3,), np.float64),
            "d": [specs.Array((), np.int32), specs.Array((1,), bool)],
        }
    )
    assert space["a"] == gym.spaces.Discrete(5)
    assert space["b"] == gym.spaces.Box(np.array([-1.0, 0.0], np.float32), 1.0, (2,), np.float32)
    assert space["c"] == gym.spaces.Box(-np.inf, np.inf, (3,), np.float64)
    assert space["d"][0].dtype == np.int32 and space["d"][0].high == np.iinfo(np.int32).max
    assert space["d"][1].dtype == np.bool_
    with pytest.raises(NotImplementedError, match="StringArray"):
        spec_to_space(specs.StringArray(()))


def test_dm_env_episode_flags_rewards_and_observations():
    env = DMEnv(_Countdown())
    assert env.action_space == gym.spaces.Discrete(2)
    obs, info = env.reset()
    assert env.observation_space.contains(obs) and obs["t"] == 0
    assert env.render() is obs

    # Truncated by the time limit (discount 1): the value of the last state still counts.
    for t in range(1, 5):
        obs, reward, terminated, truncated, info = env.step(0)
        assert env.observation_space.contains(obs) and int(obs["t"]) == t
        if t < 4:
            assert (reward, terminated, truncated) == (0.5, False, False)
    assert (reward, terminated, truncated, info["discount"]) == (1.0, False, True, 1.0)

    # Terminated (discount 0).
    env.reset()
    obs, reward, terminated, truncated, info = env.step(np.int64(1))
    assert (reward, terminated, truncated, info["discount"]) == (-1.0, True, False, 0.0)


def test_spaces_are_rllib_1_13_s_read_only_properties():
    classes = [DMEnv]
    if importlib.util.find_spec("dm_control") is not None:
        from corral.env.wrappers.dm_control_wrapper import DMCEnv

        classes.append(DMCEnv)
    for cls in classes:
        for name in ("observation_space", "action_space"):
            assert isinstance(inspect.getattr_static(cls, name), property), (cls, name)
    env = DMEnv(_Countdown())
    assert env.observation_space is env.observation_space  # converted once
    with pytest.raises(AttributeError):
        env.action_space = gym.spaces.Discrete(3)


def test_dm_env_without_seeding_api_warns_once():
    env = DMEnv(_Countdown())
    with pytest.warns(UserWarning, match="no seeding API"):
        env.reset(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env.reset(seed=1)  # once only


def _dmc_suite():
    return pytest.importorskip("dm_control.suite", reason="dm_control is the `dm-control` extra")


def test_dm_env_over_a_dm_control_task_is_seeded():
    suite = _dmc_suite()
    env = DMEnv(suite.load("cartpole", "balance", task_kwargs={"time_limit": 0.5}))
    assert isinstance(env.observation_space, gym.spaces.Dict)
    assert set(env.observation_space) == {"position", "velocity"}
    assert env.action_space == gym.spaces.Box(-1.0, 1.0, (1,), np.float64)

    def episode(seed):
        obs, _ = env.reset(seed=seed)
        rows, rewards = [np.concatenate(list(obs.values()))], []
        while True:
            obs, r, terminated, truncated, _ = env.step(np.array([0.3]))
            assert env.observation_space.contains(obs)
            rows.append(np.concatenate(list(obs.values())))
            rewards.append(r)
            if terminated or truncated:
                assert truncated and not terminated  # the suite's time limit
                return np.array(rows), np.array(rewards)

    a, b, c = episode(7), episode(7), episode(8)
    assert len(a[1]) == 50  # 0.5 s of 0.01 s control steps
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0][0], c[0][0])


def test_dmc_env_state_observations_actions_and_seeding():
    _dmc_suite()
    from corral.env.wrappers.dm_control_wrapper import DMCEnv

    env = DMCEnv("cartpole", "balance", task_kwargs={"time_limit": 1.0}, frame_skip=4)
    assert env.observation_space == gym.spaces.Box(-np.inf, np.inf, (5,), np.float32)
    assert env.state_space == env.observation_space
    assert env.action_space == gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    assert env.physics is env.dm_env.physics  # the dm_control env's attributes pass through

    def episode(seed):
        obs, info = env.reset(seed=seed)
        assert info == {} and obs.dtype == np.float32
        np.testing.assert_array_equal(obs, env.current_state)
        observations, rewards = [obs], []
        rng = np.random.default_rng(0)
        while True:
            obs, reward, terminated, truncated, info = env.step(rng.uniform(-1, 1, 1))
            assert env.observation_space.contains(obs)
            assert 0.0 <= reward <= 4.0  # four control steps of rewards in [0, 1]
            assert set(info) == {"internal_state", "discount"}
            observations.append(obs)
            rewards.append(reward)
            if terminated or truncated:
                return np.array(observations), np.array(rewards), terminated, truncated

    obs_a, rew_a, terminated, truncated = episode(3)
    obs_b, rew_b, _, _ = episode(3)
    obs_c, _, _, _ = episode(4)
    assert (terminated, truncated) == (False, True)  # the suite's time limit truncates
    assert len(rew_a) == 25  # 100 control steps, 4 per env step
    np.testing.assert_array_equal(obs_a, obs_b)
    np.testing.assert_array_equal(rew_a, rew_b)
    assert not np.array_equal(obs_a[0], obs_c[0])


def test_dmc_env_rescales_and_clips_normalized_actions():
    _dmc_suite()
    from corral.env.wrappers.dm_control_wrapper import DMCEnv

    env = DMCEnv("cartpole", "balance")
    env.reset(seed=0)
    np.testing.assert_allclose(env._true_action(np.array([0.5])), [0.5])  # bounds [-1, 1]
    np.testing.assert_allclose(env._true_action([3.0]), [1.0])  # clipped
    with pytest.raises(ValueError, match=r"shape \(1,\)"):
        env.step(np.zeros(2))
    with pytest.raises(ValueError, match="frame_skip must be an int >= 1, got 0"):
        DMCEnv("cartpole", "balance", frame_skip=0)


def _run_python(code: str, **env_vars: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "DISPLAY")}
    env.update(env_vars)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


_PIXELS = """
    import numpy as np
    from corral.env.dm_control_suite import cartpole_swingup
    try:
        env = cartpole_swingup(height=24, width=32)
    except RuntimeError as e:
        print("NO RENDERER", e)
        raise SystemExit(0)
    assert env.observation_space.shape == (3, 24, 32), env.observation_space
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs) and obs.dtype == np.float32
    obs2, *_ = env.step(np.array([0.5], np.float32))
    assert env.observation_space.contains(obs2)
    again, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs, again)
    raw = cartpole_swingup(height=24, width=32, channels_first=False, preprocess=False)
    frame, _ = raw.reset(seed=0)
    assert frame.shape == (24, 32, 3) and frame.dtype == np.uint8
    np.testing.assert_allclose(obs, frame.transpose(2, 0, 1) / 255.0 - 0.5, atol=1e-6)
    print("PIXELS OK")
"""


def test_dmc_env_pixel_observations_with_a_headless_renderer():
    _dmc_suite()
    # In a fresh interpreter: MUJOCO_GL is read when dm_control is first imported.
    out = _run_python(_PIXELS, MUJOCO_GL="egl")
    assert out.returncode == 0, out.stderr[-3000:]
    if "NO RENDERER" in out.stdout:
        pytest.skip(f"no EGL renderer on this machine: {out.stdout.strip()[:300]}")
    assert "PIXELS OK" in out.stdout


def test_dmc_env_pixels_without_a_renderer_fail_clearly():
    _dmc_suite()
    code = """
        from corral.env.wrappers.dm_control_wrapper import DMCEnv
        try:
            DMCEnv("cartpole", "balance", from_pixels=True)
        except RuntimeError as e:
            print("REFUSED", e)
        else:
            print("RENDERED")
    """
    out = _run_python(code, MUJOCO_GL="glfw")  # no DISPLAY: GLFW cannot open a window
    assert out.returncode == 0, out.stderr[-3000:]
    if "RENDERED" in out.stdout:
        pytest.skip("GLFW rendered without a display here: no renderer-less case to check")
    assert "REFUSED" in out.stdout and "MUJOCO_GL=egl" in out.stdout, out.stdout


def test_suite_creators_build_dmc_envs():
    _dmc_suite()
    from corral.env import dm_control_suite
    from corral.env.wrappers.dm_control_wrapper import DMCEnv

    env = dm_control_suite.walker_walk(from_pixels=False, frame_skip=3)
    assert isinstance(env, DMCEnv) and env._frame_skip == 3
    assert env.observation_space.shape == (24,) and env.action_space.shape == (6,)
    names = [
        "acrobot_swingup", "walker_walk", "hopper_hop", "hopper_stand", "cheetah_run",
        "walker_run", "pendulum_swingup", "cartpole_swingup", "humanoid_walk",
    ]  # fmt: skip
    assert all(callable(getattr(dm_control_suite, n)) for n in names)


def test_ppo_trains_through_dmc_env():
    _dmc_suite()
    from corral.agents.ppo import PPOTrainer
    from corral.env.wrappers.dm_control_wrapper import DMCEnv
    from corral.tune.registry import register_env

    register_env(
        "dmc_cartpole_balance",
        lambda cfg: DMCEnv("cartpole", "balance", task_kwargs={"time_limit": 2.0}),
    )
    trainer = PPOTrainer(
        env="dmc_cartpole_balance",
        config={
            "seed": 0,
            "num_workers": 0,
            "rollout_fragment_length": 200,
            "train_batch_size": 200,
            "sgd_minibatch_size": 100,
            "num_sgd_iter": 2,
            "model": {"fcnet_hiddens": [32, 32]},
        },
    )
    try:
        results = [trainer.train() for _ in range(2)]
    finally:
        trainer.stop()
    for result in results:
        assert result["episodes_this_iter"] == 2  # 100 steps per episode
        assert result["episode_len_mean"] == 100
        # Balance rewards are in [0, 1] per control step, two control steps per env step.
        assert 0.0 < result["episode_reward_mean"] <= 200.0
    assert results[-1]["timesteps_total"] == 400
