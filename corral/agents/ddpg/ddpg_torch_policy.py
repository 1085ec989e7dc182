"""DDPG's and TD3's policy: deterministic actor, (twin) critics, target networks.

DDPG: Lillicrap et al. 2015, "Continuous control with deep reinforcement
learning" (arXiv:1509.02971). TD3: Fujimoto et al. 2018, "Addressing Function
Approximation Error in Actor-Critic Methods" (arXiv:1802.09477), which adds
clipped double-Q (`twin_q`), target policy smoothing (`smooth_target_policy`,
`target_noise`, `target_noise_clip`) and delayed actor and target updates
(`policy_delay`). Exploration noise (Ornstein-Uhlenbeck for DDPG, Gaussian for
TD3) comes from `exploration_config`.

With `use_state_preprocessor` (RLlib 1.13's `build_ddpg_models`, see `FlatObsActorCritic`)
the heads read a catalog model's output. Unlike RLlib 1.13's torch DDPG, whose optimisers
left that model out (it never trained), the critics' loss trains it here; the actor reads
it detached, and the target actor and critics read the target model's copy of it.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from corral.agents.ddpg.ddpg_torch_model import DDPGTorchModel
from corral.agents.dqn.dqn_torch_policy import ComputeTDErrorMixin
from corral.models import ModelCatalog
from corral.models.torch.mlp import FIRST, preprocessed_transition
from corral.models.torch.torch_action_dist import TorchDeterministic
from corral.policy.policy_template import store_tower_stats, tower_stats
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_mixins import (
    PRIO_WEIGHTS,
    FeedForwardActingMixin,
    ReplayPolicyMixin,
    TargetNetworkMixin,
    bootstrap_discount,
    clip_and_step_each,
)
from corral.policy.torch_policy import TensorDict, TorchPolicy

# The config keys that are `DDPGTorchModel`'s keyword arguments (same names).
MODEL_KEYS = (
    "actor_hiddens",
    "actor_hidden_activation",
    "critic_hiddens",
    "critic_hidden_activation",
    "twin_q",
    "normalize_actions",
)


class DDPGTorchPolicy(
    ComputeTDErrorMixin, FeedForwardActingMixin, ReplayPolicyMixin, TargetNetworkMixin, TorchPolicy
):
    """Deterministic policy gradient with target networks (DDPG; TD3 by config)."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        super().__init__(observation_space, action_space, config)
        self.gamma = float(config["gamma"])
        self.tau = float(config["tau"])
        # The heads read a state preprocessor's output (`use_state_preprocessor`).
        self.state_preprocessor = self.model.base_model is not None
        # The target actor gives a' for the critics' targets; the target critics value it.
        self.init_target_network(tau=self.tau)
        self.polyak_every_step = not config.get("target_network_update_freq")
        self.num_critic_updates = 0
        self._last_actor_loss = torch.tensor(0.0)

    def make_model(self, num_outputs: int) -> DDPGTorchModel:
        """The actor and critics, configured by the DDPG keys of the same names, and
        with `use_state_preprocessor` the `model` network before them."""
        return DDPGTorchModel(
            self.preprocessor.observation_space,
            self.action_space,
            num_outputs,
            self.config["model"],
            "ddpg_model",
            state_preprocessor=bool(self.config.get("use_state_preprocessor")),
            **{key: self.config[key] for key in MODEL_KEYS},
        )

    def make_optimizer(self) -> torch.optim.Optimizer:
        """One fused Adam, groups actor (`actor_lr`) and critic (`critic_lr`). On
        steps without an actor update the actor has no gradients, and Adam skips it. A
        state preprocessor is in the critic's group (the critics' loss trains it)."""
        m = self.model
        return self.grouped_adam(
            actor=(m.policy_variables(), self.config["actor_lr"]),
            critic=(m.q_variables() + m.state_preprocessor_variables(), self.config["critic_lr"]),
        )

    # -- acting -------------------------------------------------------------

    def act(self, obs: torch.Tensor, explore: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """mu(s) with the exploration's noise (Ornstein-Uhlenbeck or Gaussian)."""
        if self.state_preprocessor:
            obs = self.model.state_features(obs)
        mu = self.model.get_policy_output(obs)
        actions, logp = self.exploration.get_exploration_action(
            TorchDeterministic(mu, self.model), self.global_timestep, explore
        )
        return actions.numpy(), {SampleBatch.ACTION_LOGP: logp.numpy()}

    # -- learning -----------------------------------------------------------

    def learn_step(self, batch: TensorDict, optimizer: torch.optim.Optimizer) -> dict:
        """One critic update; every `policy_delay`-th call also one actor update
        and (with `target_network_update_freq: 0`) one polyak step of the targets.

        A loss function given through `with_updates(loss_fn=...)` (RLlib's form: `fn(policy,
        model, dist_class, batch) -> (actor_loss, critic_loss)`) replaces
        `actor_critic_losses`; as with RLlib's two optimisers, each of its losses trains
        its own network only (the actor's, the critics' with the state preprocessor)."""
        self.num_critic_updates += 1
        update_actor = self.num_critic_updates % int(self.config["policy_delay"]) == 0
        if type(self).loss is not TorchPolicy.loss:
            return self._learn_with_loss_fn(batch, optimizer, update_actor)
        actor_loss, critic_loss, info = self.actor_critic_losses(batch, update_actor)
        loss = critic_loss
        terms = {"critic_loss": critic_loss}
        if actor_loss is not None:
            loss = loss + actor_loss
            terms["actor_loss"] = actor_loss
            self._last_actor_loss = actor_loss.detach()
        self.clip_and_step(loss, optimizer, terms)
        if update_actor and self.polyak_every_step:
            self.update_target(self.tau)
        return {
            "actor_loss": self._last_actor_loss,
            "critic_loss": critic_loss.detach(),
            "mean_q": info["q_t"].mean(),
            "mean_td_error": info["td_error"].abs().mean(),
        }

    def actor_critic_losses(
        self, batch: TensorDict, update_actor: bool = True
    ) -> tuple[torch.Tensor | None, torch.Tensor, dict[str, torch.Tensor]]:
        """The actor's and the critics' losses on a replayed batch.

        Returns:
            (actor_loss, critic_loss, info): actor_loss is None unless `update_actor`;
            info holds `q_t` (Q_j(s, a) of each critic, `[num_critics, B]`) and
            `td_error` (`[num_critics, B]`), without gradients.
        """
        cfg = self.config
        m, target_m = self.model, self.target_model
        obs, next_obs = batch[SampleBatch.OBS], batch[SampleBatch.NEXT_OBS]
        actor_obs = obs
        if self.state_preprocessor:
            obs, actor_obs, next_obs = preprocessed_transition(m, target_m, obs, next_obs)
        not_done = 1.0 - batch[SampleBatch.TERMINATEDS].float()

        # Critics: y = r + gamma^n (1 - terminated) min_j Q'_j(s', a'), a' = mu'(s')
        # (eq. 5 of 1509.02971; the min over twins is eq. 10 of 1802.09477).
        with torch.no_grad():
            next_actions = target_m.get_policy_output(next_obs)
            if cfg["smooth_target_policy"]:
                # Target policy smoothing: a' + clip(N(0, sigma), -c, c) (eq. 14 of 1802.09477).
                noise = torch.randn_like(next_actions) * cfg["target_noise"]
                noise = noise.clamp(-cfg["target_noise_clip"], cfg["target_noise_clip"])
                next_actions = torch.maximum(
                    torch.minimum(next_actions + noise, m.action_high), m.action_low
                )
            next_q = target_m.q_ensemble(next_obs, next_actions).amin(0)
            discount = bootstrap_discount(batch, self.gamma)
            target = batch[SampleBatch.REWARDS] + discount * not_done * next_q
        q = m.q_ensemble(obs, batch[SampleBatch.ACTIONS])
        td_error = q - target
        if cfg["use_huber"]:
            errors = F.huber_loss(
                td_error, torch.zeros_like(td_error), reduction="none", delta=cfg["huber_threshold"]
            )
        else:
            errors = 0.5 * td_error.pow(2)
        weights = batch.get(PRIO_WEIGHTS)
        critic_loss = (errors if weights is None else errors * weights).mean(-1).sum()
        critic_loss = critic_loss + self._l2(m.q_variables())

        # Actor: J(mu) = -E[Q_1(s, mu(s))] (eq. 6 of 1509.02971), through critic weights
        # it does not train; the first critic alone (as RLlib, SB3 and the TD3 paper do).
        actor_loss = None
        if update_actor:
            q_pi = m.q_ensemble(
                actor_obs, m.get_policy_output(actor_obs), detach_params=True, members=FIRST
            )
            actor_loss = -q_pi[0].mean() + self._l2(m.policy_variables())
        return actor_loss, critic_loss, {"q_t": q.detach(), "td_error": td_error.detach()}

    def _learn_with_loss_fn(
        self, batch: TensorDict, optimizer: torch.optim.Optimizer, update_actor: bool
    ) -> dict:
        """`learn_step` through the `loss` a loss function made: the critics' loss
        backpropagated into the critics' group only, the actor's (every `policy_delay`-th
        step) into the actor's group only, then clipping and one optimiser step."""
        out = self.loss(self.model, TorchDeterministic, batch)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise ValueError(
                f"{type(self).__name__}: a DDPG loss function returns (actor_loss, "
                f"critic_loss), as RLlib's `ddpg_actor_critic_loss`; got {type(out).__name__}."
            )
        actor_loss, critic_loss = out
        groups = {group["name"]: group["params"] for group in optimizer.param_groups}
        losses = [(critic_loss, groups["critic"])]
        terms = {"critic_loss": critic_loss}
        if update_actor:
            losses.append((actor_loss, groups["actor"]))
            terms["actor_loss"] = actor_loss
        clip_and_step_each(losses, optimizer, terms, self.config.get("grad_clip"))
        if update_actor and self.polyak_every_step:
            self.update_target(self.tau)
        return dict(self.extra_grad_info(batch))

    def _l2(self, params: list[torch.Tensor]) -> torch.Tensor | float:
        """`l2_reg` * sum of 0.5 ||W||^2 over weight matrices (RLlib's regulariser)."""
        l2_reg = self.config.get("l2_reg") or 0.0
        if not l2_reg:
            return 0.0
        return l2_reg * sum(0.5 * p.pow(2).sum() for p in params if p.dim() > 1)

    def td_errors(self, batch: SampleBatch) -> np.ndarray:
        """|TD error| of the first critic per transition (for prioritized replay; through
        `compute_td_error`, which takes RLlib's six arrays too)."""
        t = self.replay_tensors(batch)
        with torch.no_grad():
            obs, next_obs = t[SampleBatch.OBS], t[SampleBatch.NEXT_OBS]
            if self.state_preprocessor:
                obs, _, next_obs = preprocessed_transition(
                    self.model, self.target_model, obs, next_obs
                )
            next_q = self.target_model.q_ensemble(
                next_obs, self.target_model.get_policy_output(next_obs)
            ).amin(0)
            not_done = 1.0 - t[SampleBatch.TERMINATEDS].float()
            target = t[SampleBatch.REWARDS] + bootstrap_discount(t, self.gamma) * not_done * next_q
            q = self.model.q_ensemble(obs, t[SampleBatch.ACTIONS], members=FIRST)[0]
        return (q - target).abs().numpy()

    # -- state --------------------------------------------------------------

    def extra_state(self) -> dict[str, Any]:
        return {"num_critic_updates": self.num_critic_updates}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.num_critic_updates = int(state.get("num_critic_updates", self.num_critic_updates))


# -- RLlib 1.13's function forms (`build_torch_policy` pieces) of this policy --------------


def build_ddpg_models_and_action_dist(
    policy: DDPGTorchPolicy, obs_space: gym.Space, action_space: gym.Space, config: dict
) -> tuple[DDPGTorchModel, type]:
    """RLlib 1.13's `make_model_and_action_dist`: a new `DDPGTorchModel` as
    `DDPGTorchPolicy` builds it (for the policy's spaces and config) and
    `TorchDeterministic`; like RLlib's, it gives `policy` a `target_model`, here a
    frozen copy of the new model."""
    _, num_outputs = ModelCatalog.get_action_dist(action_space, config["model"], framework="torch")
    model = DDPGTorchPolicy.make_model(policy, num_outputs)
    policy.target_model = copy.deepcopy(model).requires_grad_(False)
    return model, TorchDeterministic


def ddpg_actor_critic_loss(
    policy: DDPGTorchPolicy, model: torch.nn.Module, dist_class: Any, train_batch: TensorDict
) -> tuple[torch.Tensor, torch.Tensor]:
    """RLlib 1.13's loss function: `(actor_loss, critic_loss)` of
    `DDPGTorchPolicy.actor_critic_losses` (the actor's always computed, as in RLlib;
    `learn_step` steps it every `policy_delay` updates). Sets RLlib's `policy.actor_loss`,
    `critic_loss`, `td_error` (summed over the twin critics) and `q_t` (the first
    critic's), and stores the stats `build_ddpg_stats` reports in `model.tower_stats`
    (without the per-row `td_error`: corral's learner stats are scalars, and replay
    priorities come from the policy's `compute_td_error`)."""
    actor_loss, critic_loss, info = DDPGTorchPolicy.actor_critic_losses(
        policy, train_batch, update_actor=True
    )
    assert actor_loss is not None
    q_t, td_error = info["q_t"][0], info["td_error"].sum(0)
    policy.actor_loss, policy.critic_loss = actor_loss, critic_loss
    policy.td_error, policy.q_t = td_error, q_t
    store_tower_stats(
        model,
        {
            "actor_loss": actor_loss,
            "critic_loss": critic_loss,
            "mean_q": q_t.mean(),
            "max_q": q_t.max(),
            "min_q": q_t.min(),
            "mean_td_error": td_error.mean(),
        },
    )
    return actor_loss, critic_loss


def build_ddpg_stats(policy: TorchPolicy, batch: TensorDict) -> dict[str, Any]:
    """RLlib 1.13's stats function: `actor_loss`, `critic_loss`, `mean_q`, `max_q`,
    `min_q` and `mean_td_error` of the last `ddpg_actor_critic_loss` (its per-row
    `td_error` is `policy.td_error`)."""
    return tower_stats(policy, batch)


def make_ddpg_optimizers(policy: DDPGTorchPolicy, config: dict) -> torch.optim.Optimizer:
    """RLlib 1.13's optimizer function: the optimiser `DDPGTorchPolicy` makes, one Adam
    whose parameter groups `actor` (`actor_lr`) and `critic` (`critic_lr`) stand for
    RLlib's two optimisers; `config` is the policy's (as RLlib passes it)."""
    return DDPGTorchPolicy.make_optimizer(policy)


def apply_gradients_fn(policy: DDPGTorchPolicy, gradients: Any) -> None:
    """RLlib 1.13's `apply_gradients_fn`: one step of the critics with `gradients` (one per
    parameter of the policy's optimiser, in its order, as `compute_gradients` gives them;
    `_directStepOptimizerSingleton`: those on the parameters), and of the actor every
    `policy_delay`-th call only (its gradients are dropped on the others), counted in
    `num_critic_updates` as `DDPGTorchPolicy.learn_step` counts its updates (RLlib's
    `global_step`). The optimiser is the update's (`policy._optimizers`), else the
    policy's own (`learn_on_batch`'s)."""
    from corral.policy.policy_template import current_optimizers, step_with_gradients

    policy.num_critic_updates = getattr(policy, "num_critic_updates", 0) + 1
    update_actor = policy.num_critic_updates % int(policy.config["policy_delay"]) == 0
    actor = () if update_actor else policy.model.policy_variables()
    step_with_gradients(policy, current_optimizers(policy), gradients, skip=actor)


def before_init_fn(
    policy: DDPGTorchPolicy, obs_space: gym.Space, action_space: gym.Space, config: dict
) -> None:
    """RLlib 1.13's `before_init`: the count of updates `policy_delay` is measured in
    starts at 0 (RLlib's `global_step`, `num_critic_updates` here; `DDPGTorchPolicy`
    starts it so in `__init__` too)."""
    policy.num_critic_updates = 0


def setup_late_mixins(
    policy: DDPGTorchPolicy, obs_space: gym.Space, action_space: gym.Space, config: dict
) -> None:
    """RLlib 1.13's `after_init`: the target networks become a copy of the model (a hard
    update; `ComputeTDErrorMixin` has nothing to set up)."""
    if getattr(policy, "target_model", None) is None:
        policy.init_target_network(tau=float(config["tau"]))
    policy.update_target(1.0)
