"""DQN's policy: the Q-network, its target copy and the TD loss.

Mnih et al. 2015, "Human-level control through deep reinforcement learning"
(Nature 518): minimise the Huber loss of the TD error
    delta = Q(s, a) - (R + gamma^k (1 - terminated) Q_target(s', a*)),
with a* = argmax_a Q_target(s', a), or with double Q-learning (van Hasselt
et al. 2016, arXiv:1509.06461, eq. 4) a* = argmax_a Q(s', a) taken from the
online network. R is the k-step return of `adjust_nstep` (k <= n_step).
With `num_atoms` > 1 the loss is C51's cross-entropy between the predicted
return distribution and the projected target distribution (Bellemare et al.
2017, arXiv:1707.06887, algorithm 1). Prioritized replay weights each
row's loss by its importance weight (Schaul et al. 2016).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from corral.agents.dqn.dqn_torch_model import DQNTorchModel
from corral.models import ModelCatalog
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_mixins import ReplayPolicyMixin, TargetNetworkMixin, bootstrap_discount
from corral.policy.torch_policy import LearningRateSchedule, TensorDict, TorchPolicy
from corral.utils.error import UnsupportedSpaceException
from corral.utils.replay_buffers import WEIGHTS
from corral.utils.torch_utils import make_adam

# Q-learning settings a config may lack (SimpleQ has none of them): plain DQN.
PLAIN_Q_SETTINGS: dict[str, Any] = {
    "num_atoms": 1,
    "v_min": -10.0,
    "v_max": 10.0,
    "noisy": False,
    "sigma0": 0.5,
    "dueling": False,
    "hiddens": [],
    "double_q": False,
    "n_step": 1,
}


class DQNTorchPolicy(LearningRateSchedule, ReplayPolicyMixin, TargetNetworkMixin, TorchPolicy):
    """Q-learning with a target network (+ double Q, dueling, n-step, C51, noisy nets)."""

    @staticmethod
    def get_default_config() -> dict:
        """DQN's `DEFAULT_CONFIG`: fills the keys this policy reads when it runs under
        another algorithm's trainer (RLlib 1.13's policy-template defaults)."""
        from corral.agents.dqn.dqn import DEFAULT_CONFIG

        return DEFAULT_CONFIG

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        if not isinstance(action_space, gym.spaces.Discrete):
            raise UnsupportedSpaceException(
                f"DQN needs a Discrete action space, got {action_space}; use SAC, DDPG or TD3 "
                "for continuous actions."
            )
        self.q_config = {
            **PLAIN_Q_SETTINGS,
            **{k: config[k] for k in PLAIN_Q_SETTINGS if k in config},
        }
        TorchPolicy.__init__(self, observation_space, action_space, config)
        LearningRateSchedule.__init__(self, config["lr"], config.get("lr_schedule"))
        # Hard copies (tau 1) unless the trainer passes the config's `tau`.
        self.init_target_network(tau=1.0)
        self.gamma = float(config["gamma"])
        # Per-row TD errors of the losses since `start_td_error_log()` (None: not kept).
        self._td_error_log: list[torch.Tensor] | None = None

    def make_model(self, num_outputs: int) -> torch.nn.Module:
        q = self.q_config
        return ModelCatalog.get_model_v2(
            self.preprocessor.observation_space,
            self.action_space,
            num_outputs,
            self.config["model"],
            framework="torch",
            name="q_model",
            default_model=DQNTorchModel,
            q_hiddens=list(q["hiddens"]),
            dueling=q["dueling"],
            num_atoms=q["num_atoms"],
            v_min=q["v_min"],
            v_max=q["v_max"],
            noisy=q["noisy"],
            sigma0=q["sigma0"],
        )

    def make_optimizer(self) -> torch.optim.Optimizer:
        return make_adam(
            self.model.parameters(), lr=self.cur_lr, eps=self.config.get("adam_epsilon", 1e-8)
        )

    # -- loss ---------------------------------------------------------------

    def loss(
        self, model: torch.nn.Module, dist_class: type, train_batch: TensorDict
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        loss, td_error, q_selected = self._td_loss(model, train_batch)
        if self._td_error_log is not None:
            self._td_error_log.append(td_error)
        with torch.no_grad():
            min_q, max_q = torch.aminmax(q_selected)
            stats = {
                "loss": loss,
                "mean_q": q_selected.mean(),
                "min_q": min_q,
                "max_q": max_q,
                "mean_td_error": td_error.mean(),
                "cur_lr": float(self.cur_lr),
            }
        return loss, stats

    def _td_loss(
        self, model: torch.nn.Module, batch: TensorDict
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(weighted mean loss, per-row TD error, Q(s, a)) for a batch of transitions."""
        obs, next_obs = batch[SampleBatch.OBS], batch[SampleBatch.NEXT_OBS]
        actions = batch[SampleBatch.ACTIONS].long()
        rewards = batch[SampleBatch.REWARDS].float()
        # gamma^k (1 - terminated) per row: the weight of the bootstrap term.
        bootstrap = bootstrap_discount(batch, self.gamma) * (
            1.0 - batch[SampleBatch.TERMINATEDS].float()
        )
        weights = batch[WEIGHTS].float() if WEIGHTS in batch else None

        logits_t = model.q_logits(obs)
        with torch.no_grad():
            logits_tp1 = self.target_model.q_logits(next_obs)
            q_tp1 = self.target_model.q_values(logits_tp1)
            if self.q_config["double_q"]:
                best_next = model.q_values(model.q_logits(next_obs)).argmax(-1, keepdim=True)
            else:
                best_next = None

        if self.q_config["num_atoms"] == 1:
            q_selected = logits_t.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
            with torch.no_grad():
                q_next = (
                    q_tp1.amax(-1) if best_next is None else q_tp1.gather(-1, best_next).squeeze(-1)
                )
                target = rewards + bootstrap * q_next
                td_error = q_selected.detach() - target
            # huber(Q - target): the same values and gradients as huber_loss(td_error).
            if weights is None:
                loss = torch.nn.functional.huber_loss(q_selected, target)
            else:
                per_row = torch.nn.functional.huber_loss(q_selected, target, reduction="none")
                loss = (weights * per_row).mean()
            return loss, td_error, q_selected.detach()

        # C51: cross-entropy to the target distribution projected onto the support.
        rows = torch.arange(len(actions))
        best_next = q_tp1.argmax(-1) if best_next is None else best_next.squeeze(-1)
        support = model.support
        log_p_selected = torch.log_softmax(logits_t[rows, actions], dim=-1)
        with torch.no_grad():
            p_next = torch.softmax(logits_tp1[rows, best_next], dim=-1)
            target_dist = project_distribution(p_next, rewards, bootstrap, support)
        cross_entropy = -(target_dist * log_p_selected).sum(-1)
        loss = (cross_entropy if weights is None else weights * cross_entropy).mean()
        q_selected = (log_p_selected.exp() * support).sum(-1)
        return loss, cross_entropy.detach(), q_selected.detach()

    def compute_td_error(self, batch: SampleBatch) -> np.ndarray:
        """Per-row TD errors (C51: cross-entropies) for prioritized replay."""
        with torch.no_grad():
            _, td_error, _ = self._td_loss(self.model, self.replay_tensors(batch))
        return td_error.numpy()

    def start_td_error_log(self) -> None:
        """Keeps the per-row TD errors of the following losses for `pop_td_errors`.

        Prioritized replay then takes its new priorities from the loss's own TD
        errors (RLlib 1.x's `td_error` learner fetch) instead of a second forward
        pass over the trained rows.
        """
        self._td_error_log = []

    def pop_td_errors(self) -> np.ndarray | None:
        """The TD errors logged since `start_td_error_log()`, in minibatch order
        (None if nothing was logged); stops logging."""
        log, self._td_error_log = self._td_error_log, None
        if not log:
            return None
        return (log[0] if len(log) == 1 else torch.cat(log)).numpy()


def huber_loss(x: torch.Tensor, delta: float = 1.0) -> torch.Tensor:
    """0.5 x^2 for |x| <= delta, delta (|x| - 0.5 delta) beyond (Mnih et al. 2015's clipping)."""
    return torch.nn.functional.huber_loss(x, torch.zeros_like(x), reduction="none", delta=delta)


def project_distribution(
    next_probs: torch.Tensor,
    rewards: torch.Tensor,
    discount: torch.Tensor | float,
    support: torch.Tensor,
) -> torch.Tensor:
    """C51's categorical projection (Bellemare et al. 2017, algorithm 1).

    Each atom z_j of the next-state distribution moves to T z_j = r + discount z_j,
    clipped to [v_min, v_max], and its probability is split between the two
    neighbouring atoms in proportion to closeness:
        b = (T z_j - v_min) / dz,
        m_floor(b) += p_j (ceil(b) - b),  m_ceil(b) += p_j (b - floor(b)),
    with all of p_j going to atom b when b is an integer.

    Args:
        next_probs: [B, N] probabilities of the chosen next action.
        rewards: [B] (n-step) rewards.
        discount: [B] or scalar: gamma^k (1 - terminated).
        support: [N] atoms z_0 < ... < z_{N-1}, evenly spaced.

    Returns:
        [B, N] the projected target distribution.
    """
    v_min, v_max = float(support[0]), float(support[-1])
    delta_z = (v_max - v_min) / (len(support) - 1)
    discount = torch.as_tensor(discount, dtype=torch.float32)
    if discount.dim() == 1:
        discount = discount.unsqueeze(-1)
    tz = (rewards.unsqueeze(-1) + discount * support.unsqueeze(0)).clamp(v_min, v_max)
    b = (tz - v_min) / delta_z
    lower, upper = b.floor().long(), b.ceil().long()
    on_atom = (lower == upper).float()
    projected = torch.zeros_like(next_probs)
    projected.scatter_add_(-1, lower, next_probs * (upper.float() - b + on_atom))
    projected.scatter_add_(-1, upper, next_probs * (b - lower.float()))
    return projected
