"""MARWIL's policy: discounted returns as targets, and the advantage-weighted log-likelihood.

Wang et al. 2018, "Exponentially Weighted Imitation Learning for Batched Historical Data"
(NeurIPS). With the discounted return R_t of each logged step and the value estimate V(s_t),
the advantage A_t = R_t - V(s_t) is scaled by the square root of a moving average c^2 of
E[A^2] and the policy maximises exp(beta A_t / c) log pi(a_t | s_t) (eq. 8); the value
function regresses R_t with weight `vf_coeff`. beta = 0 is behaviour cloning.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from corral.evaluation.postprocessing import compute_advantages
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_policy import LearningRateSchedule, TensorDict, TorchPolicy
from corral.utils.torch_utils import explained_variance


def postprocess_advantages(
    policy: Any,
    sample_batch: SampleBatch,
    other_agent_batches: dict | None = None,
    episode: Any = None,
) -> SampleBatch:
    """Adds `advantages`: the discounted return of each step (RLlib 1.13's MARWIL name).

    A trajectory that ends cut (not terminated, e.g. at the end of a line of an offline
    file) is bootstrapped with the policy's V(new_obs) of its last step, as RLlib's
    MARWIL does. The returns are computed without a baseline: the loss subtracts the
    current V(s) itself.
    """
    # compute_advantages subtracts VF_PREDS and bootstraps with the policy's values
    # where use_critic is set: zero predictions give the plain (bootstrapped) returns.
    logged_vf = sample_batch.get(SampleBatch.VF_PREDS)
    sample_batch[SampleBatch.VF_PREDS] = np.zeros(sample_batch.count, np.float32)
    out = compute_advantages(
        sample_batch, policy, gamma=policy.config["gamma"], use_gae=False, use_critic=True
    )
    if logged_vf is not None:
        out[SampleBatch.VF_PREDS] = logged_vf
    else:
        del out[SampleBatch.VF_PREDS]
    return out


def setup_mixins(policy: Any, obs_space: Any = None, action_space: Any = None, config: Any = None):
    """Gives `policy` MARWIL's state: the moving average c^2 of the squared advantages
    (starting at `moving_average_sqd_adv_norm_start`)."""
    cfg = config or policy.config
    policy._moving_average_sqd_adv_norm = torch.tensor(
        float(cfg["moving_average_sqd_adv_norm_start"]), dtype=torch.float32
    )


def marwil_loss(policy: Any, model: Any, dist_class: type, train_batch: TensorDict) -> torch.Tensor:
    """MARWIL's loss on one minibatch: -E[w log pi(a|s)] + vf_coeff * 0.5 E[(R - V)^2].

    w = exp(beta (R - V(s)) / c) with c^2 the moving average of E[(R - V)^2], updated here
    by `moving_average_sqd_adv_norm_update_rate`; w = 1 and no value loss when beta = 0
    (behaviour cloning). Stores its terms in `model.tower_stats` (read by `stats`).
    """
    cfg = policy.config
    dist_inputs, values = policy.forward_train(train_batch)
    dist = dist_class(dist_inputs, model)
    logp = dist.logp(train_batch[SampleBatch.ACTIONS])
    tower = model.tower_stats
    if cfg["beta"] != 0.0:
        returns = train_batch[SampleBatch.ADVANTAGES]
        adv = returns - values
        adv_squared_mean = torch.mean(adv**2)
        with torch.no_grad():
            # c^2 <- c^2 + rate (E[A^2] - c^2), a running estimate of the advantage scale.
            rate = cfg["moving_average_sqd_adv_norm_update_rate"]
            norm = policy._moving_average_sqd_adv_norm
            norm.add_(rate * (adv_squared_mean.detach() - norm))
            weights = torch.exp(cfg["beta"] * adv.detach() / (1e-8 + torch.sqrt(norm)))
            tower["explained_variance"] = explained_variance(returns, values)
        vf_loss = 0.5 * adv_squared_mean
    else:
        weights = torch.ones_like(logp)
        vf_loss = torch.zeros((), dtype=logp.dtype)
    logstd_coeff = cfg["bc_logstd_coeff"]
    if logstd_coeff > 0.0:
        # A bonus on log std keeps a Gaussian policy from collapsing onto the data.
        logp = logp + logstd_coeff * torch.mean(dist.log_std, dim=1)
    policy_loss = -torch.mean(weights * logp)
    total_loss = policy_loss + cfg["vf_coeff"] * vf_loss
    tower["policy_loss"] = policy_loss.detach()
    tower["vf_loss"] = vf_loss.detach()
    tower["total_loss"] = total_loss.detach()
    return total_loss


def stats(policy: Any, train_batch: TensorDict) -> dict[str, Any]:
    """MARWIL's learner stats of the last minibatch (RLlib 1.13's `stats` function)."""
    tower = policy.model.tower_stats
    out = {
        "policy_loss": tower.get("policy_loss"),
        "total_loss": tower.get("total_loss"),
        "cur_lr": getattr(policy, "cur_lr", None),
    }
    if policy.config["beta"] != 0.0:
        out["moving_average_sqd_adv_norm"] = policy._moving_average_sqd_adv_norm.clone()
        out["vf_explained_var"] = tower.get("explained_variance")
        out["vf_loss"] = tower.get("vf_loss")
    return {k: v for k, v in out.items() if v is not None}


class MARWILTorchPolicy(LearningRateSchedule, TorchPolicy):
    """MARWIL (and BC): `postprocess_trajectory` adds discounted returns, `loss` is MARWIL's;
    the learning rate follows `lr_schedule`."""

    @staticmethod
    def get_default_config() -> dict:
        """MARWIL's `DEFAULT_CONFIG` (the keys this policy reads under another trainer)."""
        from corral.agents.marwil.marwil import DEFAULT_CONFIG

        return DEFAULT_CONFIG

    # c^2, the moving average of the squared advantages (see `setup_mixins`).
    _moving_average_sqd_adv_norm: torch.Tensor
    # Returns are computed per trajectory, several of which may share one batch.
    postprocess_batched = True
    train_columns = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.ADVANTAGES)

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        TorchPolicy.__init__(self, observation_space, action_space, config)
        LearningRateSchedule.__init__(self, config["lr"], config.get("lr_schedule"))
        setup_mixins(self, observation_space, action_space, config)

    def postprocess_trajectory(
        self,
        sample_batch: SampleBatch,
        other_agent_batches: dict | None = None,
        episode: Any = None,
    ) -> SampleBatch:
        return postprocess_advantages(self, sample_batch, other_agent_batches, episode)

    def loss(
        self, model: torch.nn.Module, dist_class: type, train_batch: TensorDict
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        total = marwil_loss(self, model, dist_class, train_batch)
        return total, stats(self, train_batch)

    def extra_state(self) -> dict[str, Any]:
        return {"moving_average_sqd_adv_norm": float(self._moving_average_sqd_adv_norm)}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        if "moving_average_sqd_adv_norm" in state:
            self._moving_average_sqd_adv_norm.fill_(float(state["moving_average_sqd_adv_norm"]))
