"""Algorithm names -> trainer classes (imported only when asked for)."""

from __future__ import annotations

import difflib
import importlib

# Name -> (module, class). Algorithms not built yet are listed in
# `_PLANNED` so that asking for them gives a clear error instead of a typo hint.
_ALGORITHMS: dict[str, tuple[str, str]] = {
    "PPO": ("corral.agents.ppo", "PPOTrainer"),
    "DQN": ("corral.agents.dqn", "DQNTrainer"),
    "SimpleQ": ("corral.agents.dqn", "SimpleQTrainer"),
    "APEX": ("corral.agents.dqn", "ApexTrainer"),
    "ApeX": ("corral.agents.dqn", "ApexTrainer"),
    "SAC": ("corral.agents.sac", "SACTrainer"),
    "DDPG": ("corral.agents.ddpg", "DDPGTrainer"),
    "TD3": ("corral.agents.ddpg", "TD3Trainer"),
    "PG": ("corral.agents.pg", "PGTrainer"),
    "A2C": ("corral.agents.a3c", "A2CTrainer"),
}
_PLANNED = (
    "A3C",
    "IMPALA",
    "APPO",
    "BC",
    "MARWIL",
)


def get_trainer_class(name: str) -> type:
    """The trainer class registered under `name` (e.g. "PPO")."""
    if name in _ALGORITHMS:
        module, cls = _ALGORITHMS[name]
        return getattr(importlib.import_module(module), cls)
    from corral.tune.registry import TRAINABLE_CLASS, _global_registry

    if _global_registry.contains(TRAINABLE_CLASS, name):
        return _global_registry.get(TRAINABLE_CLASS, name)
    if name in _PLANNED:
        raise NotImplementedError(
            f"Algorithm '{name}' is not built yet; available: {list(_ALGORITHMS)}."
        )
    close = difflib.get_close_matches(name, [*_ALGORITHMS, *_PLANNED], n=3)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise ValueError(f"Unknown algorithm '{name}'; available: {list(_ALGORITHMS)}.{hint}")
