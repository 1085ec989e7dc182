"""Algorithm names -> trainer classes (imported only when asked for)."""

from __future__ import annotations

import difflib
import importlib
from typing import Any

from corral._surface import not_built_algorithms

# Name -> (module, class). Algorithms corral does not build come from the surface table
# (`corral._surface.NOT_BUILT`, the one list of what is not built) so that asking for them
# gives a clear error instead of a typo hint.
_ALGORITHMS: dict[str, tuple[str, str]] = {
    "PPO": ("corral.agents.ppo", "PPOTrainer"),
    "DQN": ("corral.agents.dqn", "DQNTrainer"),
    "SimpleQ": ("corral.agents.dqn", "SimpleQTrainer"),
    "APEX": ("corral.agents.dqn", "ApexTrainer"),
    "ApeX": ("corral.agents.dqn", "ApexTrainer"),
    "R2D2": ("corral.agents.dqn", "R2D2Trainer"),
    "QMIX": ("corral.agents.qmix", "QMixTrainer"),
    "SAC": ("corral.agents.sac", "SACTrainer"),
    "RNNSAC": ("corral.agents.sac", "RNNSACTrainer"),
    "DDPG": ("corral.agents.ddpg", "DDPGTrainer"),
    "TD3": ("corral.agents.ddpg", "TD3Trainer"),
    "APEX_DDPG": ("corral.agents.ddpg", "ApexDDPGTrainer"),
    "PG": ("corral.agents.pg", "PGTrainer"),
    "A2C": ("corral.agents.a3c", "A2CTrainer"),
    "APPO": ("corral.agents.ppo.appo", "APPOTrainer"),
    "DDPPO": ("corral.agents.ppo.ddppo", "DDPPOTrainer"),
    "BC": ("corral.agents.marwil", "BCTrainer"),
    "MARWIL": ("corral.agents.marwil", "MARWILTrainer"),
    "CQL": ("corral.agents.cql", "CQLTrainer"),
    "CQL_DQN": ("corral.agents.cql", "CQLDQNTrainer"),
    "A3C": ("corral.agents.a3c", "A3CTrainer"),
    "IMPALA": ("corral.agents.impala", "ImpalaTrainer"),
    "ES": ("corral.agents.es", "ESTrainer"),
    "ARS": ("corral.agents.ars", "ARSTrainer"),
    "MAML": ("corral.agents.maml", "MAMLTrainer"),
    "MBMPO": ("corral.agents.mbmpo", "MBMPOTrainer"),
    "BanditLinUCB": ("corral.agents.bandit", "BanditLinUCBTrainer"),
    "BanditLinTS": ("corral.agents.bandit", "BanditLinTSTrainer"),
    "SlateQ": ("corral.agents.slateq", "SlateQTrainer"),
    "AlphaStar": ("corral.agents.alpha_star", "AlphaStarTrainer"),
    "DREAMER": ("corral.agents.dreamer", "DREAMERTrainer"),
}


def _importer(name: str) -> Any:
    def load() -> tuple[type, dict]:
        module, cls = _ALGORITHMS[name]
        trainer = getattr(importlib.import_module(module), cls)
        return trainer, trainer.get_default_config()

    return load


# RLlib 1.13's `ALGORITHMS`: name -> a function returning (trainer class, default config).
ALGORITHMS: dict[str, Any] = {name: _importer(name) for name in _ALGORITHMS}


def get_trainer_class(alg: str, return_config: bool = False) -> Any:
    """The trainer class registered under `alg` (e.g. "PPO"); with `return_config`,
    `(class, its default config)` (RLlib 1.13's signature)."""
    cls = _trainer_class(alg)
    if return_config:
        return cls, cls.get_default_config()
    return cls


def register_all() -> None:
    """Registers every algorithm of the table with Tune's registry under its name (RLlib
    1.13's `ray.rllib._register_all`, served as `corral._register_all`).

    `tune.run("PPO")` finds the built-in algorithms without it; calling it puts them back
    where a `tune.register_trainable` call replaced one (RLlib's tests call it after each
    test for that). It imports every algorithm's module.
    """
    from corral.tune.registry import register_trainable

    for name in _ALGORITHMS:
        register_trainable(name, _trainer_class(name))


def loaded_trainer_classes() -> list[tuple[str, type]]:
    """(name, trainer class) of every registered algorithm whose class is loaded now:
    corral's own (those whose module is already imported; none is imported here) in
    the table's order, then those registered with `tune.register_trainable`."""
    import sys

    from corral.tune.registry import TRAINABLE_CLASS, _global_registry

    found = []
    for name, (module, cls) in _ALGORITHMS.items():
        loaded = sys.modules.get(module)
        trainer = getattr(loaded, cls, None) if loaded is not None else None
        if isinstance(trainer, type):
            found.append((name, trainer))
    for name in _global_registry.names(TRAINABLE_CLASS):
        if name not in _ALGORITHMS:
            found.append((name, _global_registry.get(TRAINABLE_CLASS, name)))
    return found


def _trainer_class(name: str) -> type:
    if name in _ALGORITHMS:
        module, cls = _ALGORITHMS[name]
        return getattr(importlib.import_module(module), cls)
    from corral.tune.registry import TRAINABLE_CLASS, _global_registry

    if _global_registry.contains(TRAINABLE_CLASS, name):
        return _global_registry.get(TRAINABLE_CLASS, name)
    planned = not_built_algorithms()
    if name in planned:
        raise NotImplementedError(
            f"Algorithm '{name}' ({planned[name].what}) is not built yet; available: "
            f"{list(_ALGORITHMS)}."
        )
    close = difflib.get_close_matches(name, [*_ALGORITHMS, *planned], n=3)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise ValueError(f"Unknown algorithm '{name}'; available: {list(_ALGORITHMS)}.{hint}")
