"""A2C's policy: GAE (or discounted-return) advantages and the actor-critic loss.

Mnih et al. 2016 (arXiv:1602.01783). The loss keeps RLlib 1.x's A3C form,
summed over the batch (not averaged, so `lr` scales with the batch size):
-sum(log pi(a|s) A) + vf_loss_coeff * 0.5 * sum((V(s) - R)^2)
- entropy_coeff * sum(H[pi(.|s)]).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch

from corral.core.learner.learner import SEQ_MASK
from corral.evaluation.postprocessing import compute_gae_for_sample_batch
from corral.policy.policy_template import class_loss, tower_stats
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_mixins import AdvantagesMixin
from corral.policy.torch_policy import (
    EntropyCoeffSchedule,
    LearningRateSchedule,
    TensorDict,
    TorchPolicy,
    default_path_hook,
)
from corral.utils.torch_utils import explained_variance, loss_term


class A3CTorchPolicy(AdvantagesMixin, LearningRateSchedule, EntropyCoeffSchedule, TorchPolicy):
    """Advantage actor-critic: `postprocess_trajectory` adds advantages, `loss` is A3C's."""

    @staticmethod
    def get_default_config() -> dict:
        """A2C's `A2C_DEFAULT_CONFIG`: fills the keys this policy reads when it runs under
        another algorithm's trainer (RLlib 1.13's policy-template defaults)."""
        from corral.agents.a3c.a2c import A2C_DEFAULT_CONFIG

        return A2C_DEFAULT_CONFIG

    train_columns = (
        SampleBatch.OBS,
        SampleBatch.ACTIONS,
        SampleBatch.ADVANTAGES,
        SampleBatch.VALUE_TARGETS,
    )

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        TorchPolicy.__init__(self, observation_space, action_space, config)
        LearningRateSchedule.__init__(self, config["lr"], config.get("lr_schedule"))
        EntropyCoeffSchedule.__init__(
            self, config["entropy_coeff"], config.get("entropy_coeff_schedule")
        )

    def loss(
        self, model: torch.nn.Module, dist_class: type, train_batch: TensorDict
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        cfg = self.config
        dist_inputs, values = self.forward_train(train_batch)
        dist = dist_class(dist_inputs, model)
        mask = train_batch.get(SEQ_MASK)

        def total(t: torch.Tensor) -> torch.Tensor:
            return t.sum() if mask is None else t[mask].sum()

        targets = train_batch[SampleBatch.VALUE_TARGETS]
        logp = dist.logp(train_batch[SampleBatch.ACTIONS])
        policy_loss = -total(logp * train_batch[SampleBatch.ADVANTAGES])
        entropy = loss_term(self.entropy_coeff, lambda: total(dist.entropy()))
        loss = policy_loss
        if self.entropy_coeff != 0.0:
            loss = loss - self.entropy_coeff * entropy
        if cfg["use_critic"]:
            vf_loss = 0.5 * total((values - targets) ** 2)
            loss = loss + cfg["vf_loss_coeff"] * vf_loss
        else:
            vf_loss = torch.zeros(())
        with torch.no_grad():
            valid_targets, valid_values = (
                (targets, values) if mask is None else (targets[mask], values[mask])
            )
            stats = {
                "policy_loss": policy_loss,
                "policy_entropy": entropy,
                "vf_loss": vf_loss,
                "vf_explained_var": explained_variance(valid_targets, valid_values),
                "entropy_coeff": self.entropy_coeff,
                "cur_lr": self.cur_lr,
            }
        return loss, stats

    # RLlib 1.13's A3C acts with `vf_preds_fetches` as its `extra_action_out_fn`; corral's
    # fast acting path fetches the values itself, so A3C keeps that path. A subclass
    # overriding `extra_action_out` gets them from `super()`, as in RLlib (and PPO).
    @default_path_hook
    def extra_action_out(
        self,
        input_dict: dict[str, Any],
        state_batches: list[torch.Tensor],
        model: torch.nn.Module,
        action_dist: Any,
    ) -> dict[str, Any]:
        """The value predictions of the acting step's model call (`vf_preds`, which GAE
        reads): `vf_preds_fetches`."""
        return vf_preds_fetches(self, input_dict, state_batches, model, action_dist)


# -- RLlib 1.13's function forms (`build_policy_class` pieces) of this policy --------------


def add_advantages(
    policy: TorchPolicy,
    sample_batch: SampleBatch,
    other_agent_batches: dict | None = None,
    episode: Any = None,
) -> SampleBatch:
    """RLlib 1.13's (deprecated) postprocess function: `compute_gae_for_sample_batch`,
    the advantages and value targets `A3CTorchPolicy` adds to a trajectory."""
    return compute_gae_for_sample_batch(policy, sample_batch)


def actor_critic_loss(
    policy: TorchPolicy, model: torch.nn.Module, dist_class: type, train_batch: TensorDict
) -> torch.Tensor:
    """RLlib 1.13's loss function: `A3CTorchPolicy.loss` of `policy` (the total loss),
    its stats stored in `model.tower_stats` (read by `stats`)."""
    return class_loss(A3CTorchPolicy, policy, model, dist_class, train_batch)


def stats(policy: TorchPolicy, train_batch: TensorDict) -> dict[str, Any]:
    """RLlib 1.13's stats function: the stats of the last `actor_critic_loss`
    (`policy_loss`, `policy_entropy`, `vf_loss`, `vf_explained_var`, `entropy_coeff`,
    `cur_lr`)."""
    return tower_stats(policy, train_batch)


def vf_preds_fetches(
    policy: TorchPolicy,
    input_dict: dict[str, Any],
    state_batches: list[torch.Tensor],
    model: torch.nn.Module,
    action_dist: Any,
) -> dict[str, torch.Tensor]:
    """RLlib 1.13's `extra_action_out_fn`: the value predictions of the acting step's
    model call (`vf_preds`, `model.value_function()`), the column GAE reads. (corral's
    own policies fetch them in `compute_actions_from_obs`; a `build_policy_class` policy
    with acting hooks fetches only what its `extra_action_out_fn` gives.)"""
    return {SampleBatch.VF_PREDS: model.value_function()}


def torch_optimizer(policy: TorchPolicy, config: dict) -> torch.optim.Optimizer:
    """RLlib 1.13's optimizer function: the Adam (`lr`) `A3CTorchPolicy` trains with;
    `config` is the policy's (as RLlib's policy template passes it)."""
    return A3CTorchPolicy.make_optimizer(policy)  # type: ignore[arg-type]


class ValueNetworkMixin:
    """RLlib 1.13's mixin: `policy._value(**input_dict)`, V of one step's input dict (the
    single-step dict after a trajectory's last step: `obs`, `state_in_<i>`,
    `prev_actions`, `prev_rewards`) as a float; 0.0 without `use_gae`.

    corral's policies bootstrap their trajectories through `TorchPolicy.bootstrap_values`
    themselves; this gives RLlib code that calls `_value` the same numbers.
    """

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        if not config["use_gae"]:
            self._value: Callable[..., float] = lambda *args, **kwargs: 0.0
            return
        policy = cast(TorchPolicy, self)

        def value(**input_dict: Any) -> float:
            obs = np.asarray(input_dict[SampleBatch.OBS], np.float32)
            if obs.ndim == len(policy.preprocessor.shape):
                obs = obs[None]
            step: dict[str, Any] = {SampleBatch.NEXT_OBS: obs.reshape(1, -1)}
            for i in range(len(policy.get_initial_state())):
                step[f"state_out_{i}"] = np.asarray(input_dict[f"state_in_{i}"], np.float32)
            if policy.is_recurrent():
                step[SampleBatch.ACTIONS] = np.asarray(input_dict[SampleBatch.PREV_ACTIONS])
                step[SampleBatch.REWARDS] = np.asarray(
                    input_dict[SampleBatch.PREV_REWARDS], np.float32
                ).reshape(1)
            rows = np.zeros(1, dtype=np.int64)
            return float(policy.bootstrap_values(SampleBatch(step), rows)[0])

        self._value = value


def setup_mixins(
    policy: TorchPolicy, obs_space: gym.Space, action_space: gym.Space, config: dict
) -> None:
    """RLlib 1.13's `before_loss_init`: the entropy-coefficient and learning-rate
    schedules (which `A3CTorchPolicy.__init__` sets up too; calling this again restarts
    them at timestep 0, as in RLlib) and `ValueNetworkMixin`'s `_value`."""
    EntropyCoeffSchedule.__init__(
        policy,  # type: ignore[arg-type]
        config["entropy_coeff"],
        config.get("entropy_coeff_schedule"),
    )
    LearningRateSchedule.__init__(policy, config["lr"], config.get("lr_schedule"))  # type: ignore[arg-type]
    ValueNetworkMixin.__init__(policy, obs_space, action_space, config)  # type: ignore[arg-type]
