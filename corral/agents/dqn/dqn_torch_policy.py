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

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from corral.agents.dqn.dqn_torch_model import DQNTorchModel
from corral.models import ModelCatalog
from corral.models.torch.torch_action_dist import TorchCategorical
from corral.policy.policy_template import class_loss, tower_stats
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_mixins import ReplayPolicyMixin, TargetNetworkMixin, bootstrap_discount
from corral.policy.torch_policy import LearningRateSchedule, TensorDict, TorchPolicy
from corral.utils.error import UnsupportedSpaceException
from corral.utils.replay_buffers import WEIGHTS
from corral.utils.torch_utils import apply_grad_clipping, make_adam

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


def td_error_batch(
    obs_t: Any,
    act_t: Any,
    rew_t: Any,
    obs_tp1: Any,
    done_mask: Any,
    importance_weights: Any = None,
) -> SampleBatch:
    """RLlib 1.13's `compute_td_error` arguments as the transition batch corral's policies
    take (`terminateds` = `done_mask`; prioritized-replay `weights` when given)."""
    batch = SampleBatch(
        {
            SampleBatch.OBS: np.asarray(obs_t),
            SampleBatch.ACTIONS: np.asarray(act_t),
            SampleBatch.REWARDS: np.asarray(rew_t, np.float32),
            SampleBatch.NEXT_OBS: np.asarray(obs_tp1),
            SampleBatch.TERMINATEDS: np.asarray(done_mask, np.float32),
        }
    )
    if importance_weights is not None:
        batch[WEIGHTS] = np.asarray(importance_weights, np.float32)
    return batch


class ComputeTDErrorMixin:
    """`compute_td_error` in both of its forms: corral's `compute_td_error(batch)` and RLlib
    1.13's `compute_td_error(obs_t, act_t, rew_t, obs_tp1, done_mask, importance_weights)`.

    The policy computes the errors of a transition batch in `td_errors(batch)` (DQN's and
    SAC's policies mix this in). RLlib's function-built policies called
    `ComputeTDErrorMixin.__init__(policy)` in `before_loss_init`; it has nothing to set up
    here (`object.__init__`).
    """

    def compute_td_error(self, *args: Any, **kwargs: Any) -> np.ndarray:
        """Per-row TD errors of a transition batch (per sequence for the recurrent
        policies), for prioritized replay; a batch, or RLlib's six arrays (see
        `td_error_batch`)."""
        if len(args) == 1 and not kwargs:
            return self.td_errors(args[0])
        return self.td_errors(td_error_batch(*args, **kwargs))

    def td_errors(self, batch: SampleBatch) -> np.ndarray:
        """The policy's TD errors of `batch` (see `compute_td_error`)."""
        raise NotImplementedError(f"{type(self).__name__} computes no TD errors.")


def uses_parameter_noise(config: dict) -> bool:
    """Whether `config` explores with `ParameterNoise` (whose Q-heads RLlib 1.13 built with
    a LayerNorm after each hidden layer, `add_layer_norm`)."""
    from corral.utils.exploration import ParameterNoise, resolve_exploration_class

    kind = (config.get("exploration_config") or {}).get("type")
    if kind is None:
        return False
    return issubclass(resolve_exploration_class(kind), ParameterNoise)


class DQNTorchPolicy(
    ComputeTDErrorMixin, LearningRateSchedule, ReplayPolicyMixin, TargetNetworkMixin, TorchPolicy
):
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
            use_noisy=q["noisy"],
            sigma0=q["sigma0"],
            add_layer_norm=uses_parameter_noise(self.config),
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
                "loss": loss.detach(),
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
            loss, td_error = td_huber_loss(q_selected, rewards, bootstrap, q_next, weights)
            return loss, td_error, q_selected.detach()

        # C51: cross-entropy to the target distribution projected onto the support.
        rows = torch.arange(len(actions))
        best_next = q_tp1.argmax(-1) if best_next is None else best_next.squeeze(-1)
        support = model.support
        with torch.no_grad():
            p_next = torch.softmax(logits_tp1[rows, best_next], dim=-1)
        loss, cross_entropy, q_selected = categorical_td_loss(
            logits_t[rows, actions], rewards, bootstrap, p_next, support, weights
        )
        return loss, cross_entropy, q_selected

    def td_errors(self, batch: SampleBatch) -> np.ndarray:
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


def td_huber_loss(
    q_selected: torch.Tensor,
    rewards: torch.Tensor,
    bootstrap: torch.Tensor | float,
    q_next: torch.Tensor,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """DQN's loss of one batch: the (importance-weighted) mean Huber loss of
    Q(s, a) - (r + bootstrap Q(s', a*)), and the per-row TD errors (without a gradient).

    Args:
        q_selected: [B] Q(s, a) of the taken actions (with a gradient).
        rewards: [B] (n-step) rewards.
        bootstrap: [B] or scalar: gamma^k (1 - terminated), the weight of the next value.
        q_next: [B] the value of the next state's chosen action, Q(s', a*).
        weights: [B] prioritized-replay importance weights (None: all 1).
    """
    with torch.no_grad():
        target = rewards + bootstrap * q_next
        td_error = q_selected.detach() - target
    # huber(Q - target): the same values and gradients as huber_loss(td_error).
    if weights is None:
        return torch.nn.functional.huber_loss(q_selected, target), td_error
    per_row = torch.nn.functional.huber_loss(q_selected, target, reduction="none")
    return (weights * per_row).mean(), td_error


def categorical_td_loss(
    logits_selected: torch.Tensor,
    rewards: torch.Tensor,
    bootstrap: torch.Tensor | float,
    probs_next: torch.Tensor,
    support: torch.Tensor,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """C51's loss of one batch: the (importance-weighted) mean cross-entropy between the
    predicted return distribution of the taken actions and the target distribution
    (`project_distribution`); with the per-row cross-entropies (the TD errors prioritized
    replay uses) and the expected Q(s, a), both without a gradient.

    Args:
        logits_selected: [B, N] per-atom logits of the taken actions (with a gradient).
        rewards, bootstrap, weights: as `td_huber_loss`'s.
        probs_next: [B, N] probabilities of the next state's chosen action.
        support: [N] the atoms.
    """
    log_p_selected = torch.log_softmax(logits_selected, dim=-1)
    with torch.no_grad():
        target_dist = project_distribution(probs_next, rewards, bootstrap, support)
    cross_entropy = -(target_dist * log_p_selected).sum(-1)
    loss = (cross_entropy if weights is None else weights * cross_entropy).mean()
    q_selected = (log_p_selected.detach().exp() * support).sum(-1)
    return loss, cross_entropy.detach(), q_selected


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


# -- RLlib 1.13's function forms of DQN's policy ---------------------------------------
# RLlib built `DQNTorchPolicy` from these functions; corral's class is the source of what
# they compute, so that they can be composed into custom policies
# (`DQNTorchPolicy.with_updates(loss_fn=...)`) and give what the class does.


class QLoss:
    """DQN's loss on precomputed Q-values (RLlib 1.13's `QLoss`): `.loss`, `.td_error`
    (per row; C51: the cross-entropies) and `.stats`.

    The same computation as `DQNTorchPolicy`'s loss (`td_huber_loss`, or
    `categorical_td_loss` with `num_atoms` > 1), with RLlib's arguments: every row
    bootstraps with gamma^n_step.

    Args:
        q_t_selected: [B] Q(s, a) of the taken actions.
        q_logits_t_selected: [B, num_atoms] their per-atom logits (C51 only).
        q_tp1_best: [B] Q(s', a*) of the next state's chosen action.
        q_probs_tp1_best: [B, num_atoms] its atom probabilities (C51 only).
        importance_weights: [B] prioritized-replay weights.
        rewards: [B] (n-step) rewards.
        done_mask: [B] 1.0 where the episode terminated.
        gamma, n_step: the discount and the steps summed into each reward.
        num_atoms, v_min, v_max: the return distribution's support (C51).
    """

    def __init__(
        self,
        q_t_selected: torch.Tensor,
        q_logits_t_selected: torch.Tensor,
        q_tp1_best: torch.Tensor,
        q_probs_tp1_best: torch.Tensor,
        importance_weights: torch.Tensor,
        rewards: torch.Tensor,
        done_mask: torch.Tensor,
        gamma: float = 0.99,
        n_step: int = 1,
        num_atoms: int = 1,
        v_min: float = -10.0,
        v_max: float = 10.0,
    ) -> None:
        bootstrap = gamma**n_step * (1.0 - done_mask.float())
        weights = importance_weights.float()
        rewards = rewards.float()
        if num_atoms > 1:
            support = torch.linspace(v_min, v_max, num_atoms, device=rewards.device)
            self.loss, self.td_error, _ = categorical_td_loss(
                q_logits_t_selected, rewards, bootstrap, q_probs_tp1_best, support, weights
            )
            self.stats = {"mean_td_error": self.td_error.mean()}
            return
        self.loss, self.td_error = td_huber_loss(
            q_t_selected, rewards, bootstrap, q_tp1_best.detach(), weights
        )
        with torch.no_grad():
            self.stats = {
                "mean_q": q_t_selected.mean(),
                "min_q": q_t_selected.min(),
                "max_q": q_t_selected.max(),
                "mean_td_error": self.td_error.mean(),
            }


def own_class(policy: TorchPolicy) -> type:
    """The nearest class of `policy` not built by `with_updates` / `build_policy_class`:
    whose methods are the class's own, not functions that may call back into these
    function forms (a `with_updates(optimizer_fn=adam_optimizer)` would recurse)."""
    return next(c for c in type(policy).__mro__ if "_template_kwargs" not in vars(c))


def q_model_and_distribution(policy: TorchPolicy, action_space: gym.Space) -> tuple[Any, type]:
    """A new model of `policy`'s class (its `make_model`) and the action distribution
    class: what RLlib 1.13's `build_*_model_and_distribution` functions return."""
    _, num_outputs = ModelCatalog.get_action_dist(
        action_space, policy.config["model"], framework="torch"
    )
    return policy.make_model(num_outputs), TorchCategorical


def build_q_model_and_distribution(
    policy: DQNTorchPolicy, obs_space: gym.Space, action_space: gym.Space, config: dict
) -> tuple[torch.nn.Module, type]:
    """RLlib 1.13's `(Q-model, TorchCategorical)`: a new Q-network as `DQNTorchPolicy`
    builds it (from the policy's own config; `config` is that config in RLlib's calls).

    The policy's own model and its target copy (`init_target_network`) exist already: a
    corral policy builds them in `__init__`, so this leaves the policy as it is.
    """
    if not isinstance(action_space, gym.spaces.Discrete):
        raise UnsupportedSpaceException(f"Action space {action_space} is not supported for DQN.")
    return q_model_and_distribution(policy, action_space)


def compute_q_values(
    policy: TorchPolicy,
    model: torch.nn.Module,
    input_dict: Any,
    state_batches: list | None = None,
    seq_lens: Any = None,
    explore: bool | None = None,
    is_training: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list]:
    """RLlib 1.13's `(Q-values [B, A], logits, probs_or_logits, state_out)` of the
    observations of `input_dict` (or of an observation batch).

    The Q-values are the model's `q_logits` (its head methods `get_q_value_distributions`
    and `get_state_value`, combined as RLlib 1.13 did), what DQN's loss trains. With
    `num_atoms` > 1, `logits` are the per-atom logits `[B, A, num_atoms]` (with dueling,
    the combined ones) and `probs_or_logits` their softmax; with `num_atoms` = 1 both are
    the `[B, A, 1]` ones of RLlib 1.13's head. A recurrent (R2D2) model runs each row as a
    sequence of one step from `state_batches` (default: its initial state).
    """
    obs = input_dict[SampleBatch.OBS] if isinstance(input_dict, Mapping) else input_dict
    obs = torch.as_tensor(np.asarray(obs) if not torch.is_tensor(obs) else obs)
    q_logits = getattr(model, "q_logits", None)
    if q_logits is not None:
        logits = q_logits(obs)
        values = model.q_values(logits)
        if logits.dim() == 3:
            return values, logits, torch.softmax(logits, dim=-1), list(state_batches or [])
        ones = torch.ones_like(values).unsqueeze(-1)
        return values, ones, ones, list(state_batches or [])
    n = len(obs)
    if state_batches is None:
        state_batches = [np.repeat(s[None], n, axis=0) for s in policy.get_initial_state()]
    state = [torch.as_tensor(np.asarray(s)) for s in state_batches]
    if seq_lens is None:
        seq_lens = torch.ones(n, dtype=torch.int32)
    values, state_out = model({SampleBatch.OBS: obs}, state, torch.as_tensor(seq_lens))
    return values, values, values, state_out


def get_distribution_inputs_and_class(
    policy: TorchPolicy,
    model: torch.nn.Module,
    input_dict: Any,
    *,
    explore: bool = True,
    is_training: bool = False,
    **kwargs: Any,
) -> tuple[torch.Tensor, type, list]:
    """RLlib 1.13's action distribution function of DQN: `(Q-values, TorchCategorical,
    state_out)`; epsilon-greedy exploration then picks from the Q-values."""
    values, _, _, state_out = compute_q_values(
        policy, model, input_dict, kwargs.get("state_batches"), kwargs.get("seq_lens"), explore
    )
    return values, TorchCategorical, state_out


def build_q_losses(
    policy: DQNTorchPolicy, model: torch.nn.Module, dist_class: Any, train_batch: TensorDict
) -> torch.Tensor:
    """DQN's loss tensor on `train_batch`: `DQNTorchPolicy.loss` (double Q, n-step, C51,
    prioritized-replay weights as the config sets them); its stats go to
    `model.tower_stats`, where `build_q_stats` reads them."""
    return class_loss(DQNTorchPolicy, policy, model, dist_class, train_batch)


def adam_optimizer(policy: DQNTorchPolicy, config: dict) -> torch.optim.Optimizer:
    """The Adam optimiser `DQNTorchPolicy` trains with (at the policy's `cur_lr`, with
    `adam_epsilon`); the policy's config is read (`config` is that config in RLlib's
    calls)."""
    return own_class(policy).make_optimizer(policy)


def build_q_stats(policy: DQNTorchPolicy, batch: Any) -> dict[str, Any]:
    """The stats of DQN's last loss (`loss`, `mean_q`, `min_q`, `max_q`,
    `mean_td_error`) and `cur_lr`."""
    return {**tower_stats(policy), "cur_lr": float(policy.cur_lr)}


def setup_early_mixins(
    policy: Any, obs_space: gym.Space, action_space: gym.Space, config: dict
) -> None:
    """RLlib 1.13's `before_init` of DQN: sets up the learning-rate schedule (`lr`,
    `lr_schedule`), as `DQNTorchPolicy.__init__` does; calling it again restarts the
    schedule at `lr` until the next global timestep update."""
    LearningRateSchedule.__init__(policy, config["lr"], config.get("lr_schedule"))


def before_loss_init(
    policy: Any, obs_space: gym.Space, action_space: gym.Space, config: dict
) -> None:
    """RLlib 1.13's `before_loss_init` of DQN (and R2D2, SimpleQ's `setup_late_mixins`,
    SAC's): the target network as a copy of the online network. corral's policies build
    their target in `__init__`; on such a policy this copies the online weights into it
    (RLlib's `TargetNetworkMixin.__init__` did the same hard update). `compute_td_error`
    needs no setup (`ComputeTDErrorMixin`)."""
    if getattr(policy, "target_model", None) is None:
        policy.init_target_network(tau=1.0)
    else:
        policy.update_target(1.0)


def grad_process_and_td_error_fn(
    policy: TorchPolicy, optimizer: torch.optim.Optimizer, loss: torch.Tensor
) -> dict[str, Any]:
    """Clips the gradients of `optimizer`'s parameters to `grad_clip` (RLlib 1.13's
    `apply_grad_clipping`); `{"grad_gnorm": norm}`, or `{}` without `grad_clip`."""
    return apply_grad_clipping(policy, optimizer, loss)


def extra_action_out_fn(
    policy: TorchPolicy,
    input_dict: Any,
    state_batches: list | None,
    model: torch.nn.Module,
    action_dist: Any = None,
) -> dict[str, torch.Tensor]:
    """`{"q_values": Q-values [B, A]}` of the observations of `input_dict` (the extra
    action output of RLlib 1.13's DQN policies)."""
    with torch.no_grad():
        values = compute_q_values(policy, model, input_dict, state_batches)[0]
    return {"q_values": values}
