"""MB-MPO's policy: MAML's (inner step on the workers, meta-loss on the driver) plus the
dynamics ensemble.

The loss, optimisers, KL coefficients and postprocessing are MAML's
(`corral.agents.maml.maml_torch_policy`): MB-MPO meta-learns exactly as MAML does, over the
ensemble's models instead of env tasks. What this policy adds is `dynamics_model`, a
`DynamicsEnsembleCustomModel` built from the `dynamics_model` config on every rollout
worker: the driver's fits it on real transitions, each remote worker's steps its imagined
episodes (`corral.env.wrappers.model_vector_env`).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from corral.agents.maml.maml_torch_policy import MAMLTorchPolicy
from corral.agents.mbmpo.model_ensemble import DynamicsEnsembleCustomModel
from corral.models.catalog import ModelCatalog
from corral.models.torch.torch_modelv2 import TorchModelV2
from corral.utils.error import UnsupportedSpaceException


def validate_spaces(
    policy: Any, observation_space: gym.Space, action_space: gym.Space, config: dict
) -> None:
    """Refuses the spaces MB-MPO cannot model: observations that are not a 1-D `Box`,
    actions that are neither `Discrete` nor a 1-D `Box`.

    Raises:
        UnsupportedSpaceException: naming the refused space.
    """
    if not (isinstance(observation_space, gym.spaces.Box) and len(observation_space.shape) == 1):
        raise UnsupportedSpaceException(
            f"Observation space {observation_space} is not supported for MB-MPO: its dynamics "
            "ensemble predicts the next observation as a vector, so it must be a 1-D Box."
        )
    if not isinstance(action_space, (gym.spaces.Box, gym.spaces.Discrete)):
        raise UnsupportedSpaceException(
            f"Action space {action_space} is not supported for MB-MPO. Must be [Box|Discrete]."
        )
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) != 1:
        raise UnsupportedSpaceException(
            f"Action space {action_space} has {len(action_space.shape)} dimensions "
            f"{action_space.shape}; MB-MPO needs a 1-D Box (or a Discrete): consider "
            "reshaping it into a single dimension."
        )


def make_dynamics_model(
    obs_space: gym.Space, action_space: gym.Space, config: dict
) -> DynamicsEnsembleCustomModel:
    """The dynamics ensemble the `dynamics_model` config describes (its `custom_model`, a
    `DynamicsEnsembleCustomModel` subclass or a registered name; None: that class), for the
    rollout worker `config["worker_index"]`."""
    model_config = dict(config["dynamics_model"])
    model_config["custom_model"] = model_config.get("custom_model") or DynamicsEnsembleCustomModel
    model = ModelCatalog.get_model_v2(
        obs_space,
        action_space,
        gym.spaces.flatdim(obs_space),
        model_config,
        framework="torch",
        name="dynamics_ensemble",
        worker_index=int(config.get("worker_index", 0) or 0),
    )
    if not isinstance(model, DynamicsEnsembleCustomModel):
        raise TypeError(
            f"`dynamics_model.custom_model` built a {type(model).__name__}; MB-MPO fits and "
            "steps a DynamicsEnsembleCustomModel (or a subclass)."
        )
    return model


def make_model_and_action_dist(
    policy: Any, obs_space: gym.Space, action_space: gym.Space, config: dict
) -> tuple[TorchModelV2, type]:
    """RLlib 1.13's builder: sets `policy.dynamics_model` (the ensemble) and `policy.pi` (the
    policy model, from `config["model"]`); returns `(policy.pi, action distribution class)`."""
    dist_class, num_outputs = ModelCatalog.get_action_dist(
        action_space, config["model"], framework="torch"
    )
    policy.dynamics_model = make_dynamics_model(obs_space, action_space, config)
    policy.pi = ModelCatalog.get_model_v2(
        obs_space,
        action_space,
        num_outputs,
        config["model"],
        framework="torch",
        name="policy_model",
    )
    return policy.pi, dist_class


class MBMPOTorchPolicy(MAMLTorchPolicy):
    """MAML's policy with MB-MPO's `dynamics_model` (see the module doc)."""

    dynamics_model: DynamicsEnsembleCustomModel
    pi: TorchModelV2

    @staticmethod
    def get_default_config() -> dict:
        """MB-MPO's `DEFAULT_CONFIG` (the keys this policy reads under another trainer)."""
        from corral.agents.mbmpo.mbmpo import DEFAULT_CONFIG

        return DEFAULT_CONFIG

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        validate_spaces(self, observation_space, action_space, config)
        super().__init__(observation_space, action_space, config)

    def make_model(self, num_outputs: int) -> TorchModelV2:
        model, _ = make_model_and_action_dist(
            self, self.observation_space, self.action_space, self.config
        )
        return model


__all__ = ["MBMPOTorchPolicy", "make_model_and_action_dist", "validate_spaces"]
