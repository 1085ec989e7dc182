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


def _register_all() -> None:
    """RLlib 1.13's `_register_all`: every algorithm registered with Tune under its name."""
    from corral.agents.registry import register_all

    register_all()


def __getattr__(name: str) -> Any:
    # RLlib 1.13's root names (`corral.SampleBatch`, `corral.TorchPolicy`, ...), served
    # lazily from the surface table so that `import corral` stays cheap.
    return _root_getattr(name)


# RLlib 1.13's whole module surface (`corral.<path>` for every `ray.rllib.<path>`): one
# `sys.meta_path` finder serves the modules and names corral has no file for.
from corral._surface import install as _install  # noqa: E402
from corral._surface import root_getattr as _root_getattr  # noqa: E402

_install()

# Ray Tune takes corral Trainer classes (`ray.tune.run(PPOTrainer, ...)`); the hook
# imports nothing of Ray, it waits for the user to import `ray.tune`.
from corral._ray_tune_hook import install_hook as _install_ray_tune_hook  # noqa: E402

_install_ray_tune_hook()
