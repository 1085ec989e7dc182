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
