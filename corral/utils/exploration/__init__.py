"""Exploration strategies (RLlib 1.x names) and the `make_exploration` factory."""

from __future__ import annotations

import importlib
from typing import Any

import gymnasium as gym

from corral.utils.config_spec import check_config_values
from corral.utils.exploration.curiosity import Curiosity
from corral.utils.exploration.epsilon_greedy import EpsilonGreedy
from corral.utils.exploration.exploration import Exploration
from corral.utils.exploration.gaussian_noise import GaussianNoise
from corral.utils.exploration.ornstein_uhlenbeck_noise import OrnsteinUhlenbeckNoise
from corral.utils.exploration.parameter_noise import ParameterNoise
from corral.utils.exploration.per_worker_epsilon_greedy import PerWorkerEpsilonGreedy
from corral.utils.exploration.per_worker_gaussian_noise import PerWorkerGaussianNoise
from corral.utils.exploration.per_worker_ornstein_uhlenbeck_noise import (
    PerWorkerOrnsteinUhlenbeckNoise,
)
from corral.utils.exploration.random import Random
from corral.utils.exploration.random_encoder import RE3
from corral.utils.exploration.slate_epsilon_greedy import SlateEpsilonGreedy
from corral.utils.exploration.slate_soft_q import SlateSoftQ
from corral.utils.exploration.soft_q import SoftQ
from corral.utils.exploration.stochastic_sampling import StochasticSampling
from corral.utils.exploration.thompson_sampling import ThompsonSampling
from corral.utils.exploration.upper_confidence_bound import UpperConfidenceBound

_BUILTIN: dict[str, type[Exploration]] = {
    cls.__name__: cls
    for cls in (
        Curiosity,
        EpsilonGreedy,
        GaussianNoise,
        OrnsteinUhlenbeckNoise,
        ParameterNoise,
        PerWorkerEpsilonGreedy,
        PerWorkerGaussianNoise,
        PerWorkerOrnsteinUhlenbeckNoise,
        Random,
        RE3,
        SlateEpsilonGreedy,
        SlateSoftQ,
        SoftQ,
        StochasticSampling,
        ThompsonSampling,
        UpperConfidenceBound,
    )
}


def resolve_exploration_class(kind: str | type) -> type[Exploration]:
    """A class of this package by name, a dotted path "pkg.module.Class", or a class."""
    if isinstance(kind, type):
        cls = kind
    elif kind in _BUILTIN:
        cls = _BUILTIN[kind]
    elif isinstance(kind, str) and "." in kind:
        module, _, name = kind.rpartition(".")
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as e:
            raise ValueError(f"Cannot import exploration class {kind!r}: {e}.") from e
    else:
        raise ValueError(
            f"Unknown exploration type {kind!r}; expected one of {sorted(_BUILTIN)}, a dotted "
            "path to an Exploration subclass, or the class itself."
        )
    if not (isinstance(cls, type) and issubclass(cls, Exploration)):
        raise ValueError(f"Exploration type {kind!r} is not a subclass of Exploration.")
    return cls


def make_exploration(
    exploration_config: dict | None,
    action_space: gym.Space,
    policy_config: dict,
    model: Any,
    num_workers: int = 0,
    worker_index: int = 0,
) -> Exploration:
    """Builds the Exploration object that `exploration_config` describes.

    `exploration_config["type"]` (default "StochasticSampling") picks the
    class; every other entry is passed to its constructor.
    """
    config = dict(exploration_config or {})
    cls = resolve_exploration_class(config.pop("type", "StochasticSampling"))
    check_config_values(config, cls.config_specs(), prefix="exploration_config.")
    try:
        return cls(
            action_space,
            framework="torch",
            policy_config=policy_config,
            model=model,
            num_workers=num_workers,
            worker_index=worker_index,
            **config,
        )
    except TypeError as e:
        raise TypeError(
            f"exploration_config {exploration_config!r} does not fit {cls.__name__}: {e}"
        ) from e


__all__ = [
    "Curiosity",
    "EpsilonGreedy",
    "Exploration",
    "GaussianNoise",
    "OrnsteinUhlenbeckNoise",
    "ParameterNoise",
    "PerWorkerEpsilonGreedy",
    "PerWorkerGaussianNoise",
    "PerWorkerOrnsteinUhlenbeckNoise",
    "Random",
    "RE3",
    "SlateEpsilonGreedy",
    "SlateSoftQ",
    "SoftQ",
    "StochasticSampling",
    "ThompsonSampling",
    "UpperConfidenceBound",
    "make_exploration",
    "resolve_exploration_class",
]
