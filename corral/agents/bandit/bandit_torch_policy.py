"""The contextual bandits' policy: linear models updated in closed form, regret reported.

A bandit policy learns without gradients: each update adds the batch's (context,
reward) rows to the pulled arms' regressions (`OnlineLinearRegression.partial_fit`).
It goes through the `Learner` like every policy, as a `learn_step` policy whose step
is that update (its "optimiser" is a placeholder that is never stepped), so
`learn_on_batch`, the trainer's learner group, metrics and checkpoints work as for the
others.

Regret: an env that reports `info["regret"]` (RLlib's bandit envs do) has it summed
into the learner stat `cumulative_regret` (RLlib 1.13's metric). The samplers keep no
`infos` column, so each trajectory's regret is read from its episode's last info when
the policy postprocesses it; that is every step's regret for one-step episodes (a
contextual bandit's), the last step's for longer ones. A batch given with an `infos`
column (`learn_on_batch` on an RLlib-style batch) has every row's regret read.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from corral.agents.bandit.bandit_torch_model import (
    DiscreteLinearModel,
    DiscreteLinearModelThompsonSampling,
    DiscreteLinearModelUCB,
    ParametricLinearModel,
    ParametricLinearModelThompsonSampling,
    ParametricLinearModelUCB,
)
from corral.models import ModelCatalog
from corral.models.torch.torch_modelv2 import TorchModelV2
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_policy import TensorDict, TorchPolicy
from corral.utils.deprecation import log_once
from corral.utils.error import UnsupportedSpaceException
from corral.utils.exploration import (
    ThompsonSampling,
    UpperConfidenceBound,
    resolve_exploration_class,
)

logger = logging.getLogger(__name__)

# The train-batch column of each row's regret (from the env's `info["regret"]`).
REGRET = "regret"

__all__ = [
    "REGRET",
    "BanditPolicyOverrides",
    "BanditTorchPolicy",
    "init_cum_regret",
    "make_model_and_action_dist",
]


def make_model_and_action_dist(
    policy: Any, obs_space: gym.Space, action_space: gym.Space, config: dict
) -> tuple[TorchModelV2, type]:
    """The bandit model for the exploration in `config` and the action distribution.

    `exploration_config["type"]` picks the scoring: "UpperConfidenceBound" the
    `...UCB` model, "ThompsonSampling" the `...ThompsonSampling` model, anything else
    the plain model (greedy scores). A `Dict` observation space with an "item" entry
    gets the parametric models (one regression over item features), any other the
    discrete ones (one regression per arm over the flattened observation).

    Args:
        policy: the policy being built (unused; RLlib 1.13's signature).
        obs_space: the preprocessed observation space (`original_space` tells a Dict).
        action_space: a `Discrete` space: the arms (or the items to choose from).
        config: the policy config; `model` may hold "alpha" and "lambda_".
    """
    if not isinstance(action_space, gym.spaces.Discrete):
        raise UnsupportedSpaceException(
            f"The bandit policies choose one of n arms: the action space must be Discrete, "
            f"got {action_space}."
        )
    dist_class, num_outputs = ModelCatalog.get_action_dist(
        action_space, config["model"], framework="torch"
    )
    exploration = (config.get("exploration_config") or {}).get("type")
    kind = resolve_exploration_class(exploration) if exploration is not None else None
    original = getattr(obs_space, "original_space", obs_space)
    parametric = isinstance(original, gym.spaces.Dict)
    if isinstance(original, gym.spaces.Dict) and "item" not in original.spaces:
        raise UnsupportedSpaceException(
            "A Dict observation space for the bandit policies needs an 'item' entry "
            f"(the items' features, [num_items, feature_dim]); got {original}."
        )
    if isinstance(original, gym.spaces.Box) and len(original.shape) > 2:
        raise UnsupportedSpaceException(
            "The bandit policies fit linear models on the context's features: an image "
            f"observation space has too many ({original}); give a feature vector."
        )
    model_class: type[TorchModelV2]
    if kind is not None and issubclass(kind, ThompsonSampling):
        model_class = (
            ParametricLinearModelThompsonSampling
            if parametric
            else DiscreteLinearModelThompsonSampling
        )
    elif kind is not None and issubclass(kind, UpperConfidenceBound):
        model_class = ParametricLinearModelUCB if parametric else DiscreteLinearModelUCB
    else:
        model_class = ParametricLinearModel if parametric else DiscreteLinearModel
    model = model_class(obs_space, action_space, num_outputs, config["model"], "LinearModel")
    return model, dist_class


def init_cum_regret(policy: Any, *args: Any) -> None:
    """Starts the policy's regret sum at 0 (RLlib 1.13 kept the list `regrets`; corral
    keeps its running sum, `cumulative_regret`)."""
    policy.cumulative_regret = 0.0
    policy._regret_reported = False


def _regret_column(batch: SampleBatch, episode: Any) -> np.ndarray | None:
    """Each row's regret: from the batch's `infos` column where it has one, else the
    trajectory's last step's from its episode's last info; None when the env reports
    no regret."""
    infos = batch.get(SampleBatch.INFOS) if SampleBatch.INFOS in batch else None
    if infos is not None and len(infos) == batch.count:
        if not all(isinstance(info, dict) and "regret" in info for info in infos):
            return None
        return np.asarray([float(info["regret"]) for info in infos], np.float32)
    info = episode.last_info_for() if episode is not None else None
    if not isinstance(info, dict) or "regret" not in info or batch.count == 0:
        return None
    regret = np.zeros(batch.count, np.float32)
    regret[-1] = float(info["regret"])
    return regret


class BanditPolicyOverrides:
    """RLlib 1.13's learning overrides of the bandit policies: closed-form updates of
    the linear models, and the regret the env reports summed as `cumulative_regret`.

    Mixed in before `TorchPolicy` (`BanditTorchPolicy`).
    """

    model: Any
    cumulative_regret: float
    _regret_reported: bool

    # Trajectories one at a time: each one's regret is its episode's last info.
    postprocess_batched = False

    def postprocess_trajectory(
        self,
        sample_batch: SampleBatch,
        other_agent_batches: dict | None = None,
        episode: Any = None,
    ) -> SampleBatch:
        """Adds the `regret` column when the env reports regret."""
        regret = _regret_column(sample_batch, episode)
        if regret is not None:
            sample_batch[REGRET] = regret
        return sample_batch

    def learn_step(self, batch: TensorDict, optimizers: Any) -> dict[str, Any]:
        """Adds the batch's rows to the models of the arms pulled (no gradients).

        Args:
            batch: a minibatch: obs, actions, rewards (and `regret` where reported).
            optimizers: the placeholder optimiser (never stepped).

        Returns:
            `update_latency`, the seconds the update took (RLlib 1.13's stat).
        """
        start = time.perf_counter()
        self.model.partial_fit(
            batch[SampleBatch.OBS], batch[SampleBatch.REWARDS], batch[SampleBatch.ACTIONS]
        )
        if REGRET in batch:
            self.cumulative_regret += float(batch[REGRET].sum())
            self._regret_reported = True
        return {"update_latency": time.perf_counter() - start}

    def learn_on_batch(self, samples: SampleBatch) -> dict:
        """One closed-form update on `samples` (RLlib 1.13's override); an `infos`
        column (an RLlib-style batch) gives the rows' regret, summed into the learner
        stat `cumulative_regret`.

        Returns:
            The policy's learner info (`update_latency`, `cumulative_regret` when the
            env reports regret).
        """
        if REGRET not in samples:
            regret = _regret_column(samples, None)
            if regret is not None:
                samples = samples.copy()
                samples[REGRET] = regret
        return super().learn_on_batch(samples)  # type: ignore[misc]

    def after_update(self, stats: dict[str, Any]) -> dict[str, Any]:
        """`cumulative_regret` after this update: the regret of every row trained on."""
        if self._regret_reported:
            return {"cumulative_regret": self.cumulative_regret}
        if log_once("bandit_no_regret"):
            logger.warning("The env did not report `regret` values in its `info` return, ignoring.")
        return {}


class BanditTorchPolicy(BanditPolicyOverrides, TorchPolicy):
    """The policy of `BanditLinUCBTrainer` and `BanditLinTSTrainer`: a linear bandit
    model (`make_model_and_action_dist`) acting through the `UpperConfidenceBound` or
    `ThompsonSampling` exploration, learning in closed form."""

    @staticmethod
    def get_default_config() -> dict:
        """The bandits' `DEFAULT_CONFIG` (RLlib 1.13's policy-template defaults)."""
        from corral.agents.bandit.bandit import DEFAULT_CONFIG

        return DEFAULT_CONFIG

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        TorchPolicy.__init__(self, observation_space, action_space, config)
        init_cum_regret(self)

    def make_model(self, num_outputs: int) -> TorchModelV2:
        """The linear bandit model for this policy's exploration."""
        model, _ = make_model_and_action_dist(
            self, self.preprocessor.observation_space, self.action_space, self.config
        )
        return model

    def make_optimizer(self) -> torch.optim.Optimizer:
        """A placeholder the learner holds the model's statistics by (the learner
        snapshots them and checks them finite after each update); `learn_step`
        updates them in closed form and never steps it."""
        return torch.optim.SGD(self.model.parameters(), lr=0.0)

    def extra_state(self) -> dict[str, Any]:
        """The regret summed so far (restored with the models' statistics)."""
        return {
            "cumulative_regret": self.cumulative_regret,
            "regret_reported": self._regret_reported,
        }

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.cumulative_regret = float(state.get("cumulative_regret", self.cumulative_regret))
        self._regret_reported = bool(state.get("regret_reported", self._regret_reported))
