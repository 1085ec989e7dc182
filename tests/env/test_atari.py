"""Atari with DeepMind preprocessing (`preprocessor_pref="deepmind"`): a CPU smoke test."""

import subprocess
import sys

import numpy as np
import pytest

from corral.env.env_context import EnvContext
from corral.env.utils import is_atari, make_env_creator

ale_py = pytest.importorskip(
    "ale_py", reason="ale-py is not installed (pip install 'corral[atari]'): Atari tests skipped"
)
pytest.importorskip(
    "cv2", reason="opencv is not installed (gymnasium's AtariPreprocessing needs it)"
)


def test_deepmind_wrappers_give_stacked_grey_frames():
    env = make_env_creator("ALE/Pong-v5", "deepmind")(EnvContext({}))
    assert env.observation_space.shape == (84, 84, 4)
    assert is_atari(env)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (84, 84, 4) and obs.dtype == np.uint8
    raw = make_env_creator("ALE/Pong-v5", "rllib")(EnvContext({}))
    assert raw.observation_space.shape == (210, 160, 3)


def test_rllib_1_x_atari_ids_and_the_models_frame_settings():
    # In a fresh process: nothing has imported ale-py (which registers the ids) yet.
    code = (
        "from corral.env.env_context import EnvContext\n"
        "from corral.env.utils import is_atari, make_env_creator\n"
        "env = make_env_creator('BreakoutNoFrameskip-v4', 'deepmind', "
        "{'dim': 42, 'framestack': False})(EnvContext({}))\n"
        "assert is_atari(env) and env.observation_space.shape == (42, 42, 1), env\n"
        "raw = make_env_creator('PongNoFrameskip-v4', 'rllib')(EnvContext({}))\n"
        "assert raw.observation_space.shape == (210, 160, 3)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=120)


def test_ppo_runs_three_iterations_on_pong():
    from corral.agents.ppo import PPOTrainer
    from corral.models.torch.visionnet import VisionNetwork

    trainer = PPOTrainer(
        env="ALE/Pong-v5",
        config={
            "num_workers": 0,
            "rollout_fragment_length": 32,
            "train_batch_size": 32,
            "sgd_minibatch_size": 16,
            "num_sgd_iter": 1,
            "seed": 0,
        },
    )
    try:
        assert isinstance(trainer.get_policy().model, VisionNetwork)
        for _ in range(3):
            result = trainer.train()
        assert result["timesteps_total"] == 96
        batch = trainer.workers.local_worker().sampler.sample()
        # clip_rewards=None clips Atari rewards to their sign.
        assert set(np.unique(batch["rewards"])) <= {-1.0, 0.0, 1.0}
        assert batch["obs"].shape[1:] == (84, 84, 4)
    finally:
        trainer.stop()


# -- RLlib 1.13's single Atari wrappers ------------------------------------------------


def _ale(game: str = "Pong"):
    import gymnasium as gym

    gym.register_envs(ale_py)
    env = gym.make(f"ALE/{game}-v5", frameskip=1, repeat_action_probability=0.0)
    env.reset(seed=0)
    return env


def _frame(env) -> int:
    return env.unwrapped.ale.getEpisodeFrameNumber()


def test_noop_reset_and_max_and_skip_count_frames():
    from corral.env.wrappers.atari_wrappers import MaxAndSkipEnv, NoopResetEnv

    env = NoopResetEnv(_ale(), noop_max=30)
    env.override_num_noops = 5
    env.reset(seed=1)
    assert _frame(env) == 5
    env.override_num_noops = None
    for seed in range(3):
        env.reset(seed=seed)
        assert 1 <= _frame(env) <= 30
    skip = MaxAndSkipEnv(_ale(), skip=4)
    skip.reset(seed=0)
    obs, *_ = skip.step(0)
    assert _frame(skip) == 4 and obs.shape == (210, 160, 3)


def test_frame_wrappers_shapes():
    from corral.env.wrappers.atari_wrappers import (
        FrameStack,
        FrameStackTrajectoryView,
        ScaledFloatFrame,
        WarpFrame,
        get_wrapper_by_cls,
    )

    warped = WarpFrame(_ale(), 84)
    obs, _ = warped.reset(seed=0)
    assert obs.shape == (84, 84, 1) and obs.dtype == np.uint8
    assert warped.observation_space.contains(obs)
    stacked = FrameStack(WarpFrame(_ale(), 42), 4)
    obs, _ = stacked.reset(seed=0)
    assert obs.shape == (42, 42, 4) and stacked.observation_space.shape == (42, 42, 4)
    assert all((obs[..., i] == obs[..., 0]).all() for i in range(4))  # the first frame, 4 times
    for _ in range(60):  # Pong's ball appears after a while
        obs, *_ = stacked.step(0)
    assert not (obs[..., 3] == obs[..., 0]).all()
    assert get_wrapper_by_cls(stacked, WarpFrame) is stacked.env
    assert get_wrapper_by_cls(stacked, ScaledFloatFrame) is None
    flat = FrameStackTrajectoryView(WarpFrame(_ale(), 84))
    assert flat.reset(seed=0)[0].shape == (84, 84)
    scaled = ScaledFloatFrame(WarpFrame(_ale(), 84))
    obs, _ = scaled.reset(seed=0)
    assert obs.dtype == np.float32 and obs.min() >= 0.0 and obs.max() <= 1.0


def test_fire_reset_and_episodic_life_on_breakout():
    from corral.env.wrappers.atari_wrappers import EpisodicLifeEnv, FireResetEnv

    env = FireResetEnv(_ale("Breakout"))
    env.reset(seed=0)
    assert _frame(env) == 2  # FIRE, then action 2
    life = EpisodicLifeEnv(_ale("Breakout"))
    life.reset(seed=0)
    lives = life.unwrapped.ale.lives()
    terminated = False
    steps = 0
    while not terminated:
        _, _, terminated, truncated, _ = life.step(1 if steps % 50 == 0 else 0)
        steps += 1
        assert not truncated and steps < 20_000
    assert life.unwrapped.ale.lives() == lives - 1 and not life.was_real_done
    frame = _frame(life)
    life.reset()
    assert _frame(life) == frame + 1  # the game went on: one no-op, no reset


def test_clip_reward_and_monitor_env():
    import gymnasium as gym

    from corral.env.wrappers.atari_wrappers import ClipRewardEnv, MonitorEnv

    class Big(gym.Env):
        observation_space = gym.spaces.Discrete(1)
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            self.t = 0
            return 0, {}

        def step(self, action):
            self.t += 1
            return 0, 5.0 if action else -3.0, self.t == 3, False, {}

    assert ClipRewardEnv(Big()).reward(5.0) == 1.0
    env = MonitorEnv(ClipRewardEnv(Big()))
    for _ in range(2):
        env.reset()
        for action in (1, 0, 1):
            env.step(action)
    assert env.get_episode_rewards() == [1.0, 1.0] and env.get_episode_lengths() == [3, 3]
    assert env.get_total_steps() == 6
    assert list(env.next_episode_results()) == [(1.0, 3), (1.0, 3)]
    assert list(env.next_episode_results()) == []


def test_wrap_deepmind_takes_rllib_s_bool_framestack():
    from corral.env.wrappers.atari_wrappers import wrap_deepmind

    assert wrap_deepmind(_ale(), framestack=True).observation_space.shape == (84, 84, 4)
    assert wrap_deepmind(_ale(), dim=42, framestack=False).observation_space.shape == (42, 42, 1)


def test_image_helpers(tmp_path):
    import cv2

    from corral.utils.images import imread, resize, rgb2gray

    rgb = np.zeros((20, 30, 3), np.uint8)
    rgb[..., 0] = 255  # red
    grey = rgb2gray(rgb)
    assert grey.shape == (20, 30) and int(grey[0, 0]) == 76  # 0.299 * 255
    assert resize(grey, 10, 15).shape == (10, 15)
    path = str(tmp_path / "red.png")
    cv2.imwrite(path, rgb[..., ::-1])  # OpenCV writes BGR
    img = imread(path)
    assert (
        img.dtype == np.float32 and img.shape == (20, 30, 3) and img[0, 0].tolist() == [0, 0, 255]
    )
    with pytest.raises(FileNotFoundError, match="no image"):
        imread(str(tmp_path / "missing.png"))


def _worker_env(trainer):
    return trainer.workers.local_worker().env


_TINY_PPO = {
    "num_workers": 0,
    "rollout_fragment_length": 16,
    "train_batch_size": 16,
    "sgd_minibatch_size": 16,
    "num_sgd_iter": 1,
    "seed": 0,
}


def test_atari_envs_of_env_creators_get_deepmind_processing_as_in_rllib_1_13():
    # RLlib 1.13 wrapped every Atari env a worker made in DeepMind's processing, also
    # those of a registered creator (`register_env("pong", lambda c: gym.make(...))`).
    import gymnasium as gym

    from corral.agents.ppo import PPOTrainer
    from corral.env.wrappers.atari_wrappers import wrap_deepmind
    from corral.models.preprocessors import GenericPixelPreprocessor, NoPreprocessor
    from corral.tune.registry import register_env

    gym.register_envs(ale_py)
    register_env("creator_pong", lambda ctx: gym.make("PongNoFrameskip-v4"))
    trainer = PPOTrainer(env="creator_pong", config=_TINY_PPO)
    try:
        env = _worker_env(trainer)
        assert env.observation_space.shape == (84, 84, 4)
        assert isinstance(trainer.get_policy().preprocessor, NoPreprocessor)
        assert trainer.train()["timesteps_total"] == 16
    finally:
        trainer.stop()
    # Wrapped once only: a creator that processes its frames itself keeps them.
    register_env(
        "creator_pong_wrapped", lambda ctx: wrap_deepmind(gym.make("PongNoFrameskip-v4"), 42)
    )
    env = make_env_creator("creator_pong_wrapped", "deepmind")(EnvContext({}))
    assert env.observation_space.shape == (42, 42, 4)
    # A custom preprocessor, or another preprocessor_pref, keeps the raw frames, which
    # RLlib's generic pixel preprocessor then resizes for the model.
    for pref, model in (("rllib", {}), ("deepmind", {"custom_preprocessor": "x"})):
        env = make_env_creator("creator_pong", pref, model)(EnvContext({}))
        assert env.observation_space.shape == (210, 160, 3)
    trainer = PPOTrainer(
        env="creator_pong",
        config={**_TINY_PPO, "preprocessor_pref": "rllib", "model": {"grayscale": True}},
    )
    try:
        assert _worker_env(trainer).observation_space.shape == (210, 160, 3)
        assert isinstance(trainer.get_policy().preprocessor, GenericPixelPreprocessor)
        batch = trainer.workers.local_worker().sample()
        obs = batch["obs"]
        assert obs.shape == (16, 84, 84, 1) and obs.dtype == np.float32
        assert obs.min() >= -1.0 and obs.max() < 1.0
    finally:
        trainer.stop()


def test_a_creators_atari_env_that_skips_frames_keeps_its_own_skip(caplog):
    import gymnasium as gym

    from corral.tune.registry import register_env
    from corral.utils.deprecation import _logged_keys

    gym.register_envs(ale_py)
    _logged_keys.discard("atari_env_skips_frames")
    register_env("creator_pong_v5", lambda ctx: gym.make("ALE/Pong-v5"))  # frameskip=4
    with caplog.at_level("WARNING"):
        env = make_env_creator("creator_pong_v5", "deepmind")(EnvContext({}))
    assert env.observation_space.shape == (84, 84, 4)
    assert env.unwrapped._frameskip == 4
    assert "skips frames itself (frameskip=4)" in caplog.text
    env.reset(seed=0)
    assert env.step(0)[0].shape == (84, 84, 4)


def test_generic_pixel_preprocessor_is_rllib_1_13_s():
    import cv2
    import gymnasium as gym

    from corral.models.preprocessors import (
        GenericPixelPreprocessor,
        get_preprocessor,
        preprocessor_for_space,
    )

    space = gym.spaces.Box(0, 255, (210, 160, 3), np.uint8)
    assert get_preprocessor(space) is GenericPixelPreprocessor
    frame = np.random.default_rng(0).integers(0, 256, (210, 160, 3), dtype=np.uint8)
    default = preprocessor_for_space(space, {})
    assert default.shape == (84, 84, 3)
    assert default.observation_space == gym.spaces.Box(-1.0, 1.0, (84, 84, 3), np.float32)
    expected = (cv2.resize(frame[25:-25], (84, 84)).astype(np.float32) - 128) / 128
    np.testing.assert_allclose(default.transform(frame), expected)
    small = preprocessor_for_space(space, {"dim": 42, "grayscale": True, "zero_mean": False})
    assert small.shape == (42, 42, 1)
    half = cv2.resize(cv2.resize(frame[25:-25], (84, 84)), (42, 42)).astype(np.float32)
    np.testing.assert_allclose(small.transform(frame), half.mean(axis=2, keepdims=True) / 255)
