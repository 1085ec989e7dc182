"""APPO's policy: PPO's clipped surrogate on V-trace corrected advantages, with a target net.

Espeholt et al. 2018 (IMPALA, arXiv:1802.01561) for V-trace; the loss follows RLlib 1.13's
APPO: the ratio of the current policy to the behaviour policy is corrected by the
(clipped) ratio of the target ("old") policy to the behaviour policy, advantages and
value targets come from V-trace run against the target policy (or from GAE with
`vtrace=False`), and an optional KL term (`use_kl_loss`) keeps the policy near the target.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from corral.agents.off_policy import TargetNetworkStateMixin
from corral.agents.ppo.ppo_torch_policy import explained_variance
from corral.evaluation.postprocessing import compute_gae_for_sample_batch
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_policy import (
    EntropyCoeffSchedule,
    LearningRateSchedule,
    TensorDict,
    TorchPolicy,
)

# Bound of log(pi / mu) in the surrogate (exp(20) ~ 5e8, far past any clip range).
_MAX_LOG_RATIO = 20.0


def _bounded(log_ratio: torch.Tensor) -> torch.Tensor:
    """A log importance ratio safe to exponentiate: within +-`_MAX_LOG_RATIO`, and 0
    where a collapsed distribution gave inf - inf."""
    return torch.nan_to_num(log_ratio, nan=0.0).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)


class KLCoeffMixin:
    """Policy mixin: an adaptive KL coefficient `kl_coeff` (RLlib's `KLCoeffMixin`).

    `update_kl(sampled_kl)` grows it by 1.5 when the KL exceeded twice `kl_target`
    and halves it below half of it.
    """

    def __init__(self, config: dict) -> None:
        self.kl_coeff = float(config["kl_coeff"])
        self.kl_target = float(config["kl_target"])

    def update_kl(self, sampled_kl: float) -> float:
        if sampled_kl > 2.0 * self.kl_target:
            self.kl_coeff *= 1.5
        elif sampled_kl < 0.5 * self.kl_target:
            self.kl_coeff *= 0.5
        return self.kl_coeff


class APPOTorchPolicy(
    LearningRateSchedule, EntropyCoeffSchedule, KLCoeffMixin, TargetNetworkStateMixin, TorchPolicy
):
    """APPO on torch: V-trace (or GAE) advantages, clipped surrogate, target network."""

    # Its postprocessing takes a fragment of several trajectories (by eps_id) at once.
    postprocess_batched = True
    train_columns = None  # the loss reads new_obs, terminateds, eps_id besides the usual

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

    def _target_forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            out, _ = self.target_model({SampleBatch.OBS: obs}, [], None)
            return out, self.target_model.value_function()

    def loss(
        self, model: torch.nn.Module, dist_class: type, train_batch: TensorDict
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        cfg = self.config
        dist_inputs, values = self.forward_train(train_batch)
        actions = train_batch[SampleBatch.ACTIONS]
        curr = dist_class(dist_inputs, model)
        behaviour = dist_class(train_batch[SampleBatch.ACTION_DIST_INPUTS], model)
        target_logits, _ = self._target_forward(train_batch[SampleBatch.OBS])
        old = dist_class(target_logits, model)
        behaviour_logp = behaviour.logp(actions)
        old_logp = old.logp(actions)
        if cfg["vtrace"]:
            log_rhos = _bounded(old_logp - behaviour_logp)
            advantages, value_targets = self._vtrace(train_batch, values, log_rhos)
        else:
            advantages = train_batch[SampleBatch.ADVANTAGES]
            value_targets = train_batch[SampleBatch.VALUE_TARGETS]
        # The behaviour policy may lag the target one: weight by their (clipped) ratio.
        is_ratio = torch.clamp(torch.exp(behaviour_logp - old_logp), 0.0, 2.0)
        # The log-ratio is bounded before exp(): a collapsed std (density spikes) must
        # not overflow to inf (the clipped surrogate is flat far beyond 1 +- clip anyway).
        log_ratio = _bounded(curr.logp(actions) - behaviour_logp)
        ratio = is_ratio * torch.exp(log_ratio)
        clip = cfg["clip_param"]
        surrogate = torch.minimum(
            advantages * ratio, advantages * torch.clamp(ratio, 1 - clip, 1 + clip)
        )
        policy_loss = -surrogate.mean()
        vf_loss = 0.5 * ((values - value_targets) ** 2).mean()
        entropy = curr.entropy().mean()
        total = policy_loss + cfg["vf_loss_coeff"] * vf_loss - self.entropy_coeff * entropy
        if cfg["use_kl_loss"]:
            kl = old.kl(curr).mean()
            total = total + self.kl_coeff * kl
        with torch.no_grad():
            stats = {
                "total_loss": total,
                "policy_loss": policy_loss,
                "vf_loss": vf_loss,
                "entropy": entropy,
                "vf_explained_var": explained_variance(value_targets, values),
                "entropy_coeff": self.entropy_coeff,
                "cur_lr": self.cur_lr,
            }
            if cfg["use_kl_loss"]:  # RLlib reports the KL only when it is in the loss
                stats["mean_kl"] = kl
                stats["cur_kl_coeff"] = self.kl_coeff
        return total, stats

    def _vtrace(
        self, batch: TensorDict, values: torch.Tensor, log_rhos: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """V-trace targets v_s and policy-gradient advantages (IMPALA eq. 1, lambda 1).

        The batch holds trajectories one after another (a fragment per env, in time
        order); a trajectory piece ends where `eps_id` changes or the episode ended.
        There the recursion restarts, bootstrapped with the target net's value of
        `new_obs` (0 after a terminal step).
        """
        cfg = self.config
        gamma = float(cfg["gamma"])
        rewards = batch[SampleBatch.REWARDS].double()
        terminated = batch[SampleBatch.TERMINATEDS].bool()
        truncated = batch[SampleBatch.TRUNCATEDS].bool()
        eps = batch[SampleBatch.EPS_ID]
        n = len(rewards)
        cont = torch.zeros(n, dtype=torch.bool)
        cont[:-1] = (eps[1:] == eps[:-1]) & ~(terminated[:-1] | truncated[:-1])
        values_d = values.detach().double()
        ends = torch.nonzero(~cont & ~terminated).flatten()
        next_values = torch.zeros(n, dtype=torch.float64)
        next_values[:-1] = torch.where(cont[:-1], values_d[1:], torch.zeros(()).double())
        if len(ends):
            _, boot = self._target_forward(batch[SampleBatch.NEXT_OBS][ends])
            next_values[ends] = boot.double()
        rhos = torch.exp(log_rhos.detach().double())
        clipped_rhos = torch.clamp(rhos, max=float(cfg["vtrace_clip_rho_threshold"]))
        cs = torch.clamp(rhos, max=1.0)
        deltas = clipped_rhos * (rewards + gamma * next_values - values_d)
        # acc_s = v_s - V(x_s) = delta_s + gamma c_s acc_{s+1} within a trajectory piece.
        acc = np.zeros(n)
        d, c, k = deltas.numpy(), cs.numpy(), cont.numpy()
        running = 0.0
        for s in range(n - 1, -1, -1):
            running = d[s] + (gamma * c[s] * running if k[s] else 0.0)
            acc[s] = running
        vs = torch.from_numpy(acc) + values_d
        vs_next = torch.zeros(n, dtype=torch.float64)
        vs_next[:-1] = torch.where(cont[:-1], vs[1:], torch.zeros(()).double())
        vs_next[ends] = next_values[ends]
        pg_rhos = torch.clamp(rhos, max=float(cfg["vtrace_clip_pg_rho_threshold"]))
        advantages = pg_rhos * (rewards + gamma * vs_next - values_d)
        return advantages.float(), vs.float()

    def after_update(self, stats: dict[str, float]) -> dict[str, float]:
        """RLlib 1.13's `UpdateTargetAndKL`: the target follows every training step; the
        KL coefficient adapts when the KL term is used."""
        self.update_target()
        if self.config["use_kl_loss"] and stats.get("mean_kl") is not None:
            return {"cur_kl_coeff": self.update_kl(float(stats["mean_kl"]))}
        return {}

    def extra_state(self) -> dict[str, Any]:
        return {"kl_coeff": self.kl_coeff, "entropy_coeff": self.entropy_coeff}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.kl_coeff = state.get("kl_coeff", self.kl_coeff)
        self.entropy_coeff = state.get("entropy_coeff", self.entropy_coeff)


# RLlib 1.13's name of the class.
AsyncPPOTorchPolicy = APPOTorchPolicy
