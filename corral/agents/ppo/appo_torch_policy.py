"""APPO's policy: PPO's clipped surrogate against a target network, on V-trace advantages.

Follows RLlib 1.13's `appo_surrogate_loss` (means over the batch):

    ratio_s = clip(mu/pi_old, 0, 2) * pi/mu          (pi current, mu behaviour,
    L_pi = -mean(min(A_s ratio_s, A_s clip(ratio_s, 1 - eps, 1 + eps)))   pi_old target)
    L = L_pi + vf_loss_coeff * 0.5 * mean((V(x_s) - v_s)^2) - entropy_coeff * mean(H)
        [+ kl_coeff * mean(KL(pi_old || pi)) with `use_kl_loss`]

With `vtrace` (default) v_s and A_s are V-trace's (`corral.agents.impala`) for the
target policy pi_old, over the trajectory pieces of the train batch; with `vtrace=False`
they are the GAE advantages and value targets the workers computed. The target network
is refreshed after every `target_update_frequency` learner updates (then the adaptive KL
coefficient moves too).
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import torch

from corral.agents.impala.impala_torch_policy import (
    make_optimizer_for,
    next_obs_values,
    vtrace_targets,
)
from corral.agents.off_policy import TargetNetworkStateMixin
from corral.core.learner.learner import SEQ_MASK
from corral.evaluation.postprocessing import compute_gae_for_sample_batch
from corral.policy.policy_template import class_loss, tower_stats
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_mixins import KLCoeffMixin
from corral.policy.torch_policy import (
    EntropyCoeffSchedule,
    LearningRateSchedule,
    TensorDict,
    TorchPolicy,
    default_path_hook,
)
from corral.utils.torch_utils import explained_variance, loss_term

# Bound of log(pi / mu) in the surrogate (exp(20) ~ 5e8, far past any clip range).
_MAX_LOG_RATIO = 20.0


def _bounded(log_ratio: torch.Tensor) -> torch.Tensor:
    """A log importance ratio safe to exponentiate: within +-`_MAX_LOG_RATIO`, and 0
    where a collapsed distribution gave inf - inf."""
    return torch.nan_to_num(log_ratio, nan=0.0).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)


class APPOTorchPolicy(
    LearningRateSchedule, EntropyCoeffSchedule, KLCoeffMixin, TargetNetworkStateMixin, TorchPolicy
):
    """APPO on torch: clipped surrogate on V-trace (or GAE) advantages, target network."""

    # Its postprocessing takes a fragment of several trajectories (by eps_id) at once.
    postprocess_batched = True
    train_columns = None  # the loss reads eps_id, t, unroll_id, terminateds, ...

    @staticmethod
    def get_default_config() -> dict:
        """APPO's `DEFAULT_CONFIG` (for this policy under another algorithm's trainer)."""
        from corral.agents.ppo.appo import DEFAULT_CONFIG

        return DEFAULT_CONFIG

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        TorchPolicy.__init__(self, observation_space, action_space, config)
        KLCoeffMixin.__init__(self, config)
        LearningRateSchedule.__init__(self, config["lr"], config.get("lr_schedule"))
        EntropyCoeffSchedule.__init__(
            self, config["entropy_coeff"], config.get("entropy_coeff_schedule")
        )
        self.target_model = copy.deepcopy(self.model)
        self.target_model.requires_grad_(False)
        self._updates_since_target = 0

    def make_optimizer(self) -> torch.optim.Optimizer:
        return make_optimizer_for(self)

    def update_target(self, tau: float = 1.0) -> None:
        """Copies the current weights into the target ("old") policy (APPO's `tau` is 1)."""
        self.target_model.load_state_dict(self.model.state_dict())

    def postprocess_trajectory(
        self,
        sample_batch: SampleBatch,
        other_agent_batches: dict | None = None,
        episode: Any = None,
    ) -> SampleBatch:
        if self.config["vtrace"]:
            return sample_batch  # V-trace runs in the loss, on the whole train batch
        return compute_gae_for_sample_batch(self, sample_batch)

    def _target_outputs(self, batch: TensorDict) -> tuple[torch.Tensor, torch.Tensor]:
        """The target network's (logits, values) on the train batch (no gradients)."""
        with torch.no_grad():
            if not self.is_recurrent():
                out, _ = self.target_model({SampleBatch.OBS: batch[SampleBatch.OBS]}, [], None)
            else:
                state = [batch[f"state_in_{i}"] for i in range(len(self.get_initial_state()))]
                out, _ = self.target_model(batch, state, batch[SampleBatch.SEQ_LENS])
            return out, self.target_model.value_function()

    def loss(
        self, model: torch.nn.Module, dist_class: type, train_batch: TensorDict
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        cfg = self.config
        dist_inputs, values = self.forward_train(train_batch)
        actions = train_batch[SampleBatch.ACTIONS]
        curr = dist_class(dist_inputs, model)
        behaviour = dist_class(train_batch[SampleBatch.ACTION_DIST_INPUTS], model)
        target_logits, _ = self._target_outputs(train_batch)
        old = dist_class(target_logits, model)
        behaviour_logp = behaviour.logp(actions)
        old_logp = old.logp(actions)
        if cfg["vtrace"]:
            value_targets, advantages, mask = vtrace_targets(
                self,
                train_batch,
                values,
                _bounded(old_logp - behaviour_logp),
                None if self.is_recurrent() else next_obs_values(model, train_batch),
            )
        else:
            advantages = train_batch[SampleBatch.ADVANTAGES]
            value_targets = train_batch[SampleBatch.VALUE_TARGETS]
            padded = train_batch.get(SEQ_MASK)
            mask = torch.ones_like(values, dtype=torch.bool) if padded is None else padded.bool()
        weight = mask.to(values.dtype)
        count = weight.sum().clamp(min=1.0)

        def mean(t: torch.Tensor) -> torch.Tensor:
            return (t * weight).sum() / count

        # The behaviour policy lags the target one: weight by their (clipped) ratio.
        is_ratio = torch.clamp(torch.exp(_bounded(behaviour_logp - old_logp)), 0.0, 2.0)
        # Bounded before exp(): a collapsed std must not overflow to inf (the clipped
        # surrogate is flat far beyond 1 +- clip anyway).
        ratio = is_ratio * torch.exp(_bounded(curr.logp(actions) - behaviour_logp))
        clip = cfg["clip_param"]
        surrogate = torch.minimum(
            advantages * ratio, advantages * torch.clamp(ratio, 1 - clip, 1 + clip)
        )
        policy_loss = -mean(surrogate)
        vf_loss = 0.5 * mean((values - value_targets) ** 2)
        # The entropy and KL terms (out of the graph where weighted by 0 or not used).
        kl_coeff = self.kl_coeff if cfg["use_kl_loss"] else 0.0
        entropy = loss_term(self.entropy_coeff, lambda: mean(curr.entropy()))
        kl = loss_term(kl_coeff, lambda: mean(old.kl(curr)))
        total = policy_loss + cfg["vf_loss_coeff"] * vf_loss
        if self.entropy_coeff != 0.0:
            total = total - self.entropy_coeff * entropy
        if kl_coeff != 0.0:
            total = total + kl_coeff * kl
        with torch.no_grad():
            stats = {
                "total_loss": total,
                "policy_loss": policy_loss,
                "vf_loss": vf_loss,
                "entropy": entropy,
                "mean_kl": kl,
                "vf_explained_var": explained_variance(value_targets[mask], values[mask]),
                "entropy_coeff": self.entropy_coeff,
                "cur_lr": self.cur_lr,
            }
            if cfg["use_kl_loss"]:
                stats["cur_kl_coeff"] = self.kl_coeff
                stats["kl"] = kl  # RLlib 1.13's name (what `UpdateKL` reads)
        return total, stats

    # RLlib 1.13's APPO acts with `add_values` as its `extra_action_out_fn`; corral's fast
    # acting path fetches the values itself, so APPO keeps that path. A subclass
    # overriding `extra_action_out` gets them from `super()`, as in RLlib (and PPO).
    @default_path_hook
    def extra_action_out(
        self,
        input_dict: dict[str, Any],
        state_batches: list[torch.Tensor],
        model: torch.nn.Module,
        action_dist: Any,
    ) -> dict[str, Any]:
        """The value predictions of the acting step's model call (`vf_preds`) where GAE
        needs them (`vtrace=False`); none under V-trace: `add_values`."""
        return add_values(self, input_dict, state_batches, model, action_dist)

    def target_update_frequency(self) -> int:
        """Learner updates between two target refreshes."""
        freq = self.config.get("target_update_frequency")
        if freq is None:
            freq = int(self.config["num_sgd_iter"]) * int(self.config["minibatch_buffer_size"])
        return max(1, int(freq))

    def after_update(self, stats: dict[str, float]) -> dict[str, float]:
        """RLlib 1.13's `UpdateTargetAndKL`: every `target_update_frequency` updates the
        target follows the current policy and, with `use_kl_loss`, the KL coefficient adapts."""
        self._updates_since_target += 1
        if self._updates_since_target < self.target_update_frequency():
            return {}
        self._updates_since_target = 0
        self.update_target()
        out = {"num_target_updates": 1.0}
        if self.config["use_kl_loss"] and stats.get("mean_kl") is not None:
            out["cur_kl_coeff"] = self.update_kl(float(stats["mean_kl"]))
        return out

    def extra_state(self) -> dict[str, Any]:
        return {
            "kl_coeff": self.kl_coeff,
            "entropy_coeff": self.entropy_coeff,
            "updates_since_target": self._updates_since_target,
        }

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.kl_coeff = state.get("kl_coeff", self.kl_coeff)
        self.entropy_coeff = state.get("entropy_coeff", self.entropy_coeff)
        self._updates_since_target = state.get("updates_since_target", 0)


# RLlib 1.13's name of the class.
AsyncPPOTorchPolicy = APPOTorchPolicy


# -- RLlib 1.13's function forms (`build_policy_class` pieces) of this policy --------------


def appo_surrogate_loss(
    policy: APPOTorchPolicy, model: torch.nn.Module, dist_class: type, train_batch: TensorDict
) -> torch.Tensor:
    """RLlib 1.13's loss function: `APPOTorchPolicy.loss` of `policy` (an
    `APPOTorchPolicy`, e.g. of a `with_updates` subclass: the loss reads its target
    network), its stats stored in `model.tower_stats` (read by `stats`)."""
    return class_loss(APPOTorchPolicy, policy, model, dist_class, train_batch)


def stats(policy: TorchPolicy, train_batch: TensorDict) -> dict[str, Any]:
    """RLlib 1.13's stats function: the stats of the last `appo_surrogate_loss`
    (`total_loss`, `policy_loss`, `vf_loss`, `entropy`, `vf_explained_var`, and with
    `use_kl_loss` `kl` and `cur_kl_coeff`, ...)."""
    return tower_stats(policy, train_batch)


def add_values(
    policy: TorchPolicy,
    input_dict: dict[str, Any],
    state_batches: list[torch.Tensor],
    model: torch.nn.Module,
    action_dist: Any,
) -> dict[str, torch.Tensor]:
    """RLlib 1.13's `extra_action_out_fn`: the value predictions (`vf_preds`, A3C's
    `vf_preds_fetches`) where GAE needs them (`vtrace=False`); none under V-trace."""
    from corral.agents.a3c.a3c_torch_policy import vf_preds_fetches

    if policy.config["vtrace"]:
        return {}
    return vf_preds_fetches(policy, input_dict, state_batches, model, action_dist)


def setup_early_mixins(
    policy: TorchPolicy, obs_space: gym.Space, action_space: gym.Space, config: dict
) -> None:
    """RLlib 1.13's `before_init`: the learning-rate schedule (which
    `APPOTorchPolicy.__init__` sets up too; calling this again restarts it at timestep 0,
    as in RLlib)."""
    LearningRateSchedule.__init__(policy, config["lr"], config.get("lr_schedule"))  # type: ignore[arg-type]


def setup_late_mixins(
    policy: APPOTorchPolicy, obs_space: gym.Space, action_space: gym.Space, config: dict
) -> None:
    """RLlib 1.13's `before_loss_init`: the KL coefficient (`KLCoeffMixin`, back to
    `kl_coeff`), `ValueNetworkMixin`'s `_value` and the target network, a copy of the
    model (synced to it when the policy has one already, as `APPOTorchPolicy.__init__`
    builds it)."""
    from corral.agents.a3c.a3c_torch_policy import ValueNetworkMixin

    KLCoeffMixin.__init__(policy, config)
    ValueNetworkMixin.__init__(policy, obs_space, action_space, config)  # type: ignore[arg-type]
    if getattr(policy, "target_model", None) is None:
        policy.target_model = copy.deepcopy(policy.model).requires_grad_(False)
    else:
        policy.update_target()
