"""Policy-side pieces shared by the replay-based (off-policy) torch policies.

RLlib 2.x's home of these mixins (`policy.torch_mixins`); in RLlib 1.13 each algorithm
had its own copy. Here they are written once for DQN, SAC, DDPG/TD3 (and APPO's
target network):

- :class:`TargetNetworkStateMixin`: the target network's weights in the policy state;
- :class:`TargetNetworkMixin`: a target copy of (part of) the model and its hard/soft
  updates (:func:`update_target_network`);
- :class:`ReplayPolicyMixin`: the transition columns a replayed batch carries, n-step
  postprocessing, numpy -> torch for `compute_td_error`, and the fused Adam with one
  parameter group per network;
- :class:`FeedForwardActingMixin`: SAC's and DDPG's acting on flat observations;
- :class:`AdvantagesMixin`: the on-policy policies' postprocessing (PG, A2C, PPO):
  advantages and value targets of each trajectory;
- :class:`KLCoeffMixin`: PPO's and APPO's adaptive KL coefficient.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch

from corral.core.learner.finite import Optimizers, optimizers_of
from corral.core.learner.learner import check_finite_update
from corral.evaluation.postprocessing import compute_advantages
from corral.policy.sample_batch import SampleBatch
from corral.utils.replay_buffers import N_STEP, WEIGHTS, adjust_nstep
from corral.utils.torch_utils import clear_grads, make_adam, step_optimizer

# Importance-sampling weights of prioritized replay (RLlib's column name).
PRIO_WEIGHTS = WEIGHTS

# Prefix of the target network's entries in the policy state's weights.
TARGET_PREFIX = "_target."

# The columns a replayed transition batch trains on: (s, a, r, s', terminated), the
# n-step length of each row's return and its prioritized-replay weight.
REPLAY_TRAIN_COLUMNS = (
    SampleBatch.OBS,
    SampleBatch.ACTIONS,
    SampleBatch.REWARDS,
    SampleBatch.NEXT_OBS,
    SampleBatch.TERMINATEDS,
    N_STEP,
    PRIO_WEIGHTS,
)


def polyak_update(source: torch.nn.Module, target: torch.nn.Module, tau: float) -> None:
    """theta' <- tau * theta + (1 - tau) * theta' for every parameter (Lillicrap et al.
    2015, arXiv:1509.02971, sec. 3); tau = 1 copies the weights."""
    targets: list[torch.Tensor] = list(target.parameters())
    sources: list[torch.Tensor] = list(source.parameters())
    if len(targets) != len(sources):
        raise ValueError(
            f"polyak_update: the target has {len(targets)} parameters, the source {len(sources)}."
        )
    with torch.no_grad():
        # One multi-tensor kernel for all parameters instead of one lerp_ call per tensor.
        torch._foreach_lerp_(targets, sources, tau)


def update_target_network(source: torch.nn.Module, target: torch.nn.Module, tau: float) -> None:
    """Hard (tau = 1: the whole state, buffers included) or soft (polyak by `tau`) update
    of `target` towards `source`."""
    if tau == 1.0:
        target.load_state_dict(source.state_dict())
    else:
        polyak_update(source, target, tau)


def bootstrap_discount(batch: dict[str, torch.Tensor], gamma: float) -> torch.Tensor | float:
    """gamma^k of each row's bootstrap term: k rewards were summed into its n-step
    return (the `n_step` column; absent when n_step = 1, then k = 1)."""
    k = batch.get(N_STEP)
    return gamma if k is None else torch.pow(gamma, k.float())


class _PostprocessMixin:
    """`postprocess_trajectory` through the mixin's `postprocess(batch)`; a fragment of
    several trajectories (by eps_id) is postprocessed at once."""

    postprocess_batched = True

    def postprocess_trajectory(
        self,
        sample_batch: SampleBatch,
        other_agent_batches: dict | None = None,
        episode: Any = None,
    ) -> SampleBatch:
        return self.postprocess(sample_batch)

    def postprocess(self, sample_batch: SampleBatch) -> SampleBatch:
        """The postprocessed batch (in place or new)."""
        raise NotImplementedError


class TargetNetworkStateMixin:
    """Puts `self.target_model`'s weights into the policy state, prefixed with
    `TARGET_PREFIX`, so that a restored (or recreated) policy resumes with the
    same target network; a state without them re-syncs the target instead.

    Mix in before `TorchPolicy`; the policy defines `update_target()` and a
    `target_model` (or overrides `target_network()`).
    """

    def target_network(self) -> torch.nn.Module:
        return self.target_model  # type: ignore[attr-defined]

    def get_target_weights(self) -> dict[str, np.ndarray]:
        """The target network's weights (numpy copies), e.g. for workers that compute
        TD errors (`worker_side_prioritization`)."""
        return {
            k: v.detach().cpu().numpy().copy()
            for k, v in self.target_network().state_dict().items()
        }

    def set_target_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads `get_target_weights()`'s output into the target network (under the
        policy's lock, as `set_weights`)."""
        target = self.target_network()
        state = {k: torch.as_tensor(np.array(v)) for k, v in weights.items()}
        with self._lock:  # type: ignore[attr-defined]
            target.load_state_dict(state)

    def get_state(self) -> dict[str, Any]:
        state = super().get_state()  # type: ignore[misc]
        target = {TARGET_PREFIX + k: v for k, v in self.get_target_weights().items()}
        state["weights"] = {**state["weights"], **target}
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        weights = state["weights"]
        n = len(TARGET_PREFIX)
        own = {k: v for k, v in weights.items() if not k.startswith(TARGET_PREFIX)}
        target = {
            k[n:]: torch.as_tensor(np.asarray(v))
            for k, v in weights.items()
            if k.startswith(TARGET_PREFIX)
        }
        super().set_state({**state, "weights": own})  # type: ignore[misc]
        if target:
            self.target_network().load_state_dict(target)
        else:
            self.update_target(1.0)  # type: ignore[attr-defined]


class TargetNetworkMixin(TargetNetworkStateMixin):
    """A frozen copy of `target_source()` (the model, or a part of it) as the target
    network, moved towards it by `update_target(tau)`.

    Call `init_target_network()` after `TorchPolicy.__init__`. `target_tau` is the tau
    of `update_target()` without an argument (1.0: a hard copy).
    """

    target_tau: float = 1.0

    def target_source(self) -> torch.nn.Module:
        """The network the target copies (default: the whole model)."""
        return self.model  # type: ignore[attr-defined,no-any-return]

    def init_target_network(self, tau: float = 1.0) -> None:
        """Builds `target_model`, a copy of `target_source()` no gradient reaches."""
        self.target_model = copy.deepcopy(self.target_source()).requires_grad_(False)
        self.target_tau = float(tau)

    def update_target(self, tau: float | None = None) -> None:
        """Target <- tau * source + (1 - tau) * target (tau = 1: a copy)."""
        tau = self.target_tau if tau is None else float(tau)
        update_target_network(self.target_source(), self.target_network(), tau)

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads the model's weights and then moves the target network to them by
        `update_target()`, as RLlib 1.13's `TargetNetworkMixin.set_weights`: a copy where
        the target tau is 1 (DQN, R2D2, SlateQ), one soft step of `tau` where it is the
        config's `tau` (SAC, DDPG, TD3; RLlib 1.13's SAC mixin did the same).

        A policy of a remote rollout worker (`worker_index` > 0 in its config) loads the
        model's weights only: those are the learner's weights broadcast after each update,
        and the worker's target network is the driver's, sent on its own
        (`sync_target_networks`, for worker-side prioritization) or unused, so the
        broadcasts neither overwrite it nor pay for a copy.
        """
        super().set_weights(weights)  # type: ignore[misc]
        if not self.config.get("worker_index"):  # type: ignore[attr-defined]
            self.update_target()


class ReplayPolicyMixin(_PostprocessMixin):
    """What the replay-trained policies share: their train columns, n-step
    postprocessing (`n_step` of the config), numpy -> torch for `compute_td_error`, and
    a fused Adam with one parameter group per network."""

    train_columns = REPLAY_TRAIN_COLUMNS

    def n_step(self) -> int:
        """Rewards summed into each target (the config's `n_step`, 1 when it has none)."""
        return int(self.config.get("n_step", 1))  # type: ignore[attr-defined]

    def postprocess(self, sample_batch: SampleBatch) -> SampleBatch:
        """n-step returns (`adjust_nstep`) when `n_step` > 1; with
        `worker_side_prioritization` (outside evaluation), the rows' initial priorities
        in the `weights` column (`initial_priorities`)."""
        config = self.config  # type: ignore[attr-defined]
        n_step = self.n_step()
        if n_step > 1:
            adjust_nstep(n_step, config["gamma"], sample_batch)
        if (
            config.get("worker_side_prioritization")
            and not config.get("in_evaluation")
            and sample_batch.count
        ):
            sample_batch[PRIO_WEIGHTS] = self.initial_priorities(sample_batch)
        return sample_batch

    def initial_priorities(self, batch: SampleBatch) -> np.ndarray:
        """|TD error| + `prioritized_replay_eps` of each (postprocessed) transition, by
        this copy of the policy: Ape-X's worker-side prioritization (Horgan et al. 2018,
        sec. 3), which a rollout worker runs on the batches it samples, so that the driver
        adds them to prioritized replay with these priorities instead of the largest one.

        The policy defines `compute_td_error(batch)` (the driver's priority updates use
        it too, so both compute the same priorities for the same weights).
        """
        td_error = self.compute_td_error(batch)  # type: ignore[attr-defined]
        eps = float(self.config.get("prioritized_replay_eps", 1e-6))  # type: ignore[attr-defined]
        return np.abs(np.asarray(td_error, dtype=np.float64)).reshape(-1) + eps

    def replay_tensors(self, batch: SampleBatch) -> dict[str, torch.Tensor]:
        """The batch's train columns as (CPU) tensors, for `compute_td_error`."""
        return {
            k: torch.from_numpy(np.ascontiguousarray(batch[k]))
            for k in self.train_columns
            if k in batch
        }

    def grouped_adam(self, **groups: tuple[Any, float]) -> torch.optim.Optimizer:
        """One Adam with a parameter group per network: `name=(parameters, lr)`, with the
        config's `optimizer` dict (`make_adam`: fused unless it picks an implementation).
        The networks' losses have disjoint parameters, so one step of one optimiser
        updates them all."""
        param_groups = [
            {"params": list(params), "lr": lr, "name": name}
            for name, (params, lr) in groups.items()
        ]
        return make_adam(param_groups, self.config.get("optimizer"))  # type: ignore[attr-defined]

    def clip_and_step(
        self, loss: torch.Tensor, optimizer: Optimizers, terms: dict[str, Any]
    ) -> None:
        """`clip_and_step` (below) with the config's `grad_clip`."""
        clip_and_step(loss, optimizer, terms, self.config.get("grad_clip"))  # type: ignore[attr-defined]


def clip_and_step(
    loss: torch.Tensor, optimizer: Optimizers, terms: dict[str, Any], grad_clip: float | None
) -> None:
    """backward, the finite check (before any weight changes), per-group gradient clipping
    to `grad_clip` (None or 0: none), and the optimiser step (of each one of a dict of
    optimisers, whose parameters `loss` trains disjointly): one update of several networks
    whose losses are summed into `loss`."""
    optimizers = optimizers_of(optimizer)
    groups = [group for opt in optimizers for group in opt.param_groups]
    clear_grads(p for group in groups for p in group["params"])
    loss.backward()
    _check_clip_step(loss, optimizer, terms, grad_clip, optimizers, groups)


def clip_and_step_each(
    losses: Sequence[tuple[torch.Tensor, Iterable[torch.Tensor]]],
    optimizer: Optimizers,
    terms: dict[str, Any],
    grad_clip: float | None,
) -> None:
    """`clip_and_step` with RLlib's one optimiser per loss: each `(loss, parameters)`
    backpropagated into its parameters only (what it would give other parameters is
    dropped), then the finite check, per-group clipping and the step(s)."""
    optimizers = optimizers_of(optimizer)
    groups = [group for opt in optimizers for group in opt.param_groups]
    clear_grads(p for group in groups for p in group["params"])
    for i, (loss, params) in enumerate(losses):
        loss.backward(inputs=list(params), retain_graph=i < len(losses) - 1)
    total = sum(loss.detach() for loss, _ in losses)
    _check_clip_step(total, optimizer, terms, grad_clip, optimizers, groups)


def _check_clip_step(
    loss: Any,
    optimizer: Optimizers,
    terms: dict[str, Any],
    grad_clip: float | None,
    optimizers: list[torch.optim.Optimizer],
    groups: list[dict[str, Any]],
) -> None:
    """The finite check, per-group clipping and the steps after the backward pass(es)."""
    check_finite_update(loss, optimizer, terms)
    if grad_clip:
        for group in groups:
            torch.nn.utils.clip_grad_norm_(group["params"], grad_clip)
    for opt in optimizers:
        step_optimizer(opt)


class FeedForwardActingMixin:
    """`compute_actions_from_obs` of the actor-critic policies (SAC, DDPG): the
    flattened observations through `act(obs, explore)`, without the model's input dict."""

    def compute_actions_from_obs(
        self,
        obs: np.ndarray,
        explore: bool | None = None,
        state: list[np.ndarray] | None = None,
        prev_actions: np.ndarray | None = None,
        prev_rewards: np.ndarray | None = None,
        view_inputs: dict[str, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Feed-forward only: `state` and previous actions/rewards are not used; the
        flattened observations go to `act(obs, explore)` (SAC, DDPG).

        Raises:
            ValueError: `view_inputs` (trajectory-view columns for acting) were given:
                these policies act on the observations alone.
        """
        if view_inputs:
            raise ValueError(
                f"{type(self).__name__} acts on observations only; acting-time view "
                f"columns {sorted(view_inputs)} (ViewRequirement with "
                "used_for_compute_actions=True) are not supported for it."
            )
        if explore is None:
            explore = self.config.get("explore", True)  # type: ignore[attr-defined]
        with torch.inference_mode():
            return self.act(torch.from_numpy(obs).reshape(len(obs), -1), bool(explore))

    def act(self, obs: torch.Tensor, explore: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Actions and extra fetches for flat float observations `[B, obs_dim]` (run
        under `torch.inference_mode`)."""
        raise NotImplementedError(f"{type(self).__name__} must define act(obs, explore).")


class AdvantagesMixin(_PostprocessMixin):
    """Adds `advantages` and `value_targets` to each sampled trajectory
    (`compute_advantages`): GAE (Schulman et al. 2016) with the config's `lambda`, or
    discounted returns, per `advantage_settings()`."""

    def advantage_settings(self) -> dict[str, Any]:
        """`compute_advantages`' `lambda_`, `use_gae` and `use_critic` (default: the
        config's `lambda`, `use_gae`, `use_critic`)."""
        cfg = self.config  # type: ignore[attr-defined]
        return {
            "lambda_": cfg["lambda"],
            "use_gae": cfg["use_gae"],
            "use_critic": cfg["use_critic"],
        }

    def postprocess(self, sample_batch: SampleBatch) -> SampleBatch:
        """`compute_advantages` with the config's `gamma` and `advantage_settings()`."""
        gamma = self.config["gamma"]  # type: ignore[attr-defined]
        return compute_advantages(sample_batch, self, gamma=gamma, **self.advantage_settings())


class KLCoeffMixin:
    """An adaptive KL coefficient `kl_coeff` (RLlib 1.13's `KLCoeffMixin`, of PPO and
    APPO): `update_kl(sampled_kl)` grows it by 1.5 when the KL exceeded twice
    `kl_target` and halves it below half of it."""

    def __init__(self, config: dict) -> None:
        self.kl_coeff = float(config["kl_coeff"])
        self.kl_target = float(config["kl_target"])

    @property
    def kl_coeff_val(self) -> float:
        """RLlib 1.13's name of the coefficient's value."""
        return self.kl_coeff

    def update_kl(self, sampled_kl: float) -> float:
        """Adapts the coefficient to the KL measured in the last update; returns it."""
        if sampled_kl > 2.0 * self.kl_target:
            self.kl_coeff *= 1.5
        elif sampled_kl < 0.5 * self.kl_target:
            self.kl_coeff *= 0.5
        return self.kl_coeff


__all__ = [
    "AdvantagesMixin",
    "FeedForwardActingMixin",
    "KLCoeffMixin",
    "PRIO_WEIGHTS",
    "REPLAY_TRAIN_COLUMNS",
    "TARGET_PREFIX",
    "ReplayPolicyMixin",
    "TargetNetworkMixin",
    "TargetNetworkStateMixin",
    "bootstrap_discount",
    "clip_and_step",
    "clip_and_step_each",
    "polyak_update",
    "update_target_network",
]
