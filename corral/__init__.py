"""corral: the classic RLlib Trainer API on PyTorch and Gymnasium.

    from corral.agents.ppo import PPOTrainer
    trainer = PPOTrainer(config={"num_workers": 0}, env="CartPole-v1")
    print(trainer.train()["episode_reward_mean"])

Importing `corral` is cheap: torch and the algorithms load on first use.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "get_trainer_class", "register_env"]


def register_env(name: str, env_creator: Any) -> None:
    """Makes `name` usable as `env`; `env_creator(env_context)` builds one env."""
    from corral.tune.registry import register_env as _register

    _register(name, env_creator)


def get_trainer_class(name: str) -> type:
    """The trainer class of an algorithm name such as "PPO"."""
    from corral.agents.registry import get_trainer_class as _get

    return _get(name)
