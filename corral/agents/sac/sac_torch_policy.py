"""SAC's policy: squashed-Gaussian (or categorical) actor, twin Q critics, learned temperature.

Soft Actor-Critic, Haarnoja et al. 2018a ("Soft Actor-Critic: Off-Policy Maximum
Entropy Deep RL with a Stochastic Actor", arXiv:1801.01290) with the automatic
temperature of Haarnoja et al. 2018b ("Soft Actor-Critic Algorithms and
Applications", arXiv:1812.05905); discrete actions as in Christodoulou 2019
("Soft Actor-Critic for Discrete Action Settings", arXiv:1910.07207).

One gradient step (`learn_step`) computes three losses from the same
parameters, as RLlib does, and applies them in one optimiser step:
- the Q-networks towards the soft Bellman target (eqs. 5-6 of 1801.01290,
  clipped double-Q: the minimum of the two target critics),
- the actor through the reparameterised sample (eq. 12 of 1801.01290),
- the temperature alpha (eq. 18 of 1812.05905);
then it moves the target critics towards the critics by polyak averaging with `tau`.

With `use_state_preprocessor` (see `FlatObsActorCritic`) the heads read a catalog model's
output: the critics' loss trains that model too, the actor reads it detached, and the
target is a copy of the whole model, whose own state preprocessor feeds the target critics.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from corral.agents.dqn.dqn_torch_policy import ComputeTDErrorMixin, own_class
from corral.agents.dqn.dqn_torch_policy import before_loss_init as setup_late_mixins
from corral.agents.sac.sac_torch_model import SACTorchModel
from corral.core.learner.learner import loss_and_stats
from corral.models.catalog import ModelCatalog, custom_model_class
from corral.models.torch.mlp import FIRST, flatten_obs, preprocessed_transition
from corral.models.torch.torch_action_dist import (
    TorchBeta,
    TorchCategorical,
    TorchSquashedGaussian,
)
from corral.policy.policy_template import store_tower_stats, tower_stats
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_mixins import (
    PRIO_WEIGHTS,
    FeedForwardActingMixin,
    ReplayPolicyMixin,
    TargetNetworkMixin,
    bootstrap_discount,
)
from corral.policy.torch_policy import TensorDict, TorchPolicy

_LOG2 = math.log(2.0)


def squashed_gaussian_sample(
    dist_inputs: torch.Tensor, deterministic: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draws a = tanh(u), u ~ N(mean, std) by reparameterisation; returns (a, log pi(a|s)).

    `dist_inputs` is `concat(mean, log_std)`. The density of the squashed action
    is the Gaussian's times the Jacobian of tanh (appendix C of arXiv:1801.01290):
    log pi(a|s) = log N(u) - sum_i log(1 - tanh(u_i)^2), where
    log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)) is the stable form.
    With `deterministic`, u is the mean (log pi is then that of the mode).
    """
    mean, log_std = dist_inputs.chunk(2, dim=-1)
    if deterministic:
        noise = torch.zeros_like(mean)
        u = mean
    else:
        noise = torch.randn_like(mean)
        u = mean + log_std.exp() * noise
    gaussian_logp = -0.5 * noise.pow(2) - log_std - 0.5 * math.log(2.0 * math.pi)
    log_jacobian = 2.0 * (_LOG2 - u - F.softplus(-2.0 * u))
    return torch.tanh(u), (gaussian_logp - log_jacobian).sum(-1)


def beta_sample(
    dist_inputs: torch.Tensor, deterministic: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draws a ~ Beta(alpha, beta) scaled onto [-1, 1] by reparameterisation (torch's
    implicit gradients); returns (a, log pi(a|s)) (`_use_beta_distribution`).

    `dist_inputs` is `concat(alpha, beta)` before `softplus(x) + 1` (`TorchBeta`: both
    concentrations > 1, so one mode and no infinite density at the bounds). log pi is the
    Beta's log-density of the action's position in [0, 1] (RLlib 1.13's `TorchBeta.logp`).
    With `deterministic`, a is the Beta's mean.
    """
    dist = TorchBeta(dist_inputs, low=-1.0, high=1.0)
    actions = dist.deterministic_sample() if deterministic else dist.sample()
    return actions, dist.logp(actions)


class SACTorchPolicy(
    ComputeTDErrorMixin, FeedForwardActingMixin, ReplayPolicyMixin, TargetNetworkMixin, TorchPolicy
):
    """SAC for 1-D Box actions (acting in [-1, 1]) and for Discrete actions."""

    # The losses `loss` sums (one optimiser step trains each network by its own), in
    # RLlib's order; `actor_critic_loss` returns them with one critic loss per critic.
    loss_names: tuple[str, ...] = ("actor_loss", "critic_loss", "alpha_loss")

    # What `torch_compile_learner` compiles: the losses, not `learn_step`'s steps.
    compiled_loss_methods = ("_losses_continuous", "_losses_discrete")
    # Whether this class's losses take `_use_beta_distribution` (SAC's; not RNNSAC's nor
    # CQL's, which refuse it).
    beta_distribution_built = True

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        if config.get("_use_beta_distribution") and not type(self).beta_distribution_built:
            raise NotImplementedError(
                f"_use_beta_distribution=True is built for SAC only; {type(self).__name__} "
                "draws its actions from the squashed Gaussian (set it to False)."
            )
        super().__init__(observation_space, action_space, config)
        self.discrete = self.model.discrete
        # How the actor's Box actions are drawn: a tanh-squashed Gaussian, or a Beta
        # distribution on [-1, 1] (`_use_beta_distribution`); (a, log pi(a|s)) either way.
        self.actor_sample = (
            beta_sample
            if getattr(self.model, "use_beta_distribution", False)
            else squashed_gaussian_sample
        )
        self.gamma = float(config["gamma"])
        self.tau = float(config["tau"])
        # The heads read a state preprocessor's output (`use_state_preprocessor`).
        self.state_preprocessor = self.model.base_model is not None
        # Only the critics have target copies: the soft target needs no target actor
        # (with a state preprocessor, the whole model: see `target_source`).
        self.init_target_network(tau=self.tau)
        self.polyak_every_step = not config.get("target_network_update_freq")
        self.deterministic_loss = bool(config.get("_deterministic_loss"))

    @property
    def target_q(self) -> torch.nn.Module:
        """The target critics: SAC's name for the mixin's `target_model` (a property, so
        that weight syncing, which walks the policy's modules, sends them once); with a
        state preprocessor, the critics of the target model."""
        if self.state_preprocessor:
            return self.target_model.q_net
        return self.target_model

    def make_model(self, num_outputs: int) -> SACTorchModel:
        """SAC's model: a `SACTorchModel`, or the subclass of it that `model`'s
        `custom_model` names (RLlib 1.13's way to customise SAC's whole model, e.g. its
        `build_policy_model` / `build_q_model`), built with `custom_model_config` too.

        Raises:
            ValueError: `model`'s `custom_model` is no `SACTorchModel` and there is no
                state preprocessor (`use_state_preprocessor`) for it to be.
        """
        cfg = self.config
        state_preprocessor = bool(cfg.get("use_state_preprocessor"))
        kwargs: dict[str, Any] = {
            "state_preprocessor": state_preprocessor,
            "policy_model_config": cfg["policy_model"],
            "q_model_config": cfg["Q_model"],
            "twin_q": cfg["twin_q"],
            "initial_alpha": cfg["initial_alpha"],
            "target_entropy": cfg["target_entropy"],
            "use_beta_distribution": bool(cfg.get("_use_beta_distribution")),
        }
        space = self.preprocessor.observation_space
        custom = (cfg.get("model") or {}).get("custom_model")
        if custom:
            model_cls = custom_model_class(custom)
            if isinstance(model_cls, type) and issubclass(model_cls, SACTorchModel):
                model = ModelCatalog.get_model_v2(
                    space,
                    self.action_space,
                    num_outputs,
                    cfg["model"],
                    framework="torch",
                    name="sac_model",
                    **kwargs,
                )
                assert isinstance(model, SACTorchModel)
                return model
            if not state_preprocessor:
                raise ValueError(
                    f"SAC: model.custom_model={custom!r} is no subclass of SACTorchModel "
                    "(RLlib 1.13's rule for SAC's `model`). Give the policy and Q networks "
                    "as `policy_model` / `Q_model` {'custom_model': ...}, subclass "
                    "SACTorchModel (e.g. its build_policy_model / build_q_model), or set "
                    "use_state_preprocessor=True to run it before SAC's heads."
                )
        return SACTorchModel(
            space, self.action_space, num_outputs, cfg["model"], "sac_model", **kwargs
        )

    def make_optimizer(self) -> torch.optim.Optimizer:
        """One fused Adam with three parameter groups (actor, critic, alpha), each
        with its `optimization` learning rate; a state preprocessor is in the critic's
        group (the critics' loss trains it)."""
        lrs, m = self.config["optimization"], self.model
        return self.grouped_adam(
            actor=(m.policy_variables(), lrs["actor_learning_rate"]),
            critic=(
                m.q_variables() + m.state_preprocessor_variables(),
                lrs["critic_learning_rate"],
            ),
            alpha=([m.log_alpha], lrs["entropy_learning_rate"]),
        )

    # -- acting -------------------------------------------------------------

    def act(self, obs: torch.Tensor, explore: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Samples of the squashed Gaussian (its mode without `explore`) or of the Beta
        distribution (its mean), or of the categorical distribution (its argmax)."""
        return self.sample_actions(self.actor_inputs(self.model, obs), explore)

    def actor_inputs(self, model: torch.nn.Module, obs: torch.Tensor) -> torch.Tensor:
        """The actor's distribution inputs for flat observations (through the state
        preprocessor, if any)."""
        if self.state_preprocessor:
            obs = model.state_features(obs)
        return model.get_policy_output(obs)

    def action_dist_class(self) -> type:
        """The actor's distribution (RLlib 1.13's): `TorchCategorical` for Discrete
        actions, `TorchBeta` with `_use_beta_distribution`, else `TorchSquashedGaussian`."""
        if self.discrete:
            return TorchCategorical
        if self.actor_sample is beta_sample:
            return TorchBeta
        return TorchSquashedGaussian

    def sample_actions(
        self, dist_inputs: torch.Tensor, explore: bool
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Actions and extra fetches of the actor's distribution inputs (see `act`)."""
        if self.discrete:
            log_probs = torch.log_softmax(dist_inputs, dim=-1)
            if explore:
                actions = torch.multinomial(log_probs.exp(), 1).squeeze(-1)
            else:
                actions = log_probs.argmax(-1)
            logp = log_probs.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        else:
            actions, logp = self.actor_sample(dist_inputs, not explore)
        extra = {
            SampleBatch.ACTION_LOGP: logp.numpy(),
            SampleBatch.ACTION_DIST_INPUTS: dist_inputs.numpy(),
        }
        return actions.numpy(), extra

    def to_env_actions(self, actions: np.ndarray, unsquash: bool, clip: bool) -> np.ndarray:
        """Box actions live in [-1, 1] (tanh); they are always stretched onto the
        env's bounds unless `normalize_actions` is on and the caller asks for the
        normalised action (`unsquash=False`)."""
        if self._low is not None and not self.config.get("normalize_actions"):
            unsquash = True
        return super().to_env_actions(actions, unsquash, clip)

    # -- learning -----------------------------------------------------------

    def learn_step(self, batch: TensorDict, optimizer: torch.optim.Optimizer) -> dict:
        """One SAC gradient step on a minibatch of transitions (see the module docstring):
        `loss` (or a `with_updates(loss_fn=...)` replacing it, whose stats then come from
        `extra_grad_info`), one optimiser step, and the target update."""
        loss, stats = loss_and_stats(self, self.loss(self.model, self.dist_class, batch), batch)
        # The losses touch disjoint parameters (the actor's loss sees the critics
        # through detached weights), so one backward pass of their sum gives each
        # parameter group exactly its own loss's gradient.
        self.clip_and_step(loss, optimizer, stats)
        if self.polyak_every_step:
            self.update_target(self.tau)
        return {k: v.detach() if torch.is_tensor(v) else v for k, v in stats.items()}

    def loss(
        self, model: torch.nn.Module, dist_class: type, train_batch: TensorDict
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """(The sum of the `loss_names` losses, stats) on a minibatch; the losses are of
        the policy's own model (the learner passes it as `model`)."""
        terms = self.loss_terms(train_batch)
        del terms["critic_losses"]  # (`critic_loss` is their sum)
        total = terms[self.loss_names[0]]
        for name in self.loss_names[1:]:
            total = total + terms[name]
        return total, terms

    def loss_terms(self, batch: TensorDict) -> dict[str, torch.Tensor]:
        """The losses (`loss_names`, `critic_losses`: one per critic) and stats of one
        minibatch."""
        if self.discrete:
            return self._losses_discrete(batch)
        return self._losses_continuous(batch)

    def extra_grad_info(self, train_batch: TensorDict) -> dict[str, Any]:
        """The stats of the last `loss` (RLlib 1.13's SAC `stats`)."""
        return stats(self, train_batch)

    def _losses_continuous(self, batch: TensorDict) -> dict[str, torch.Tensor]:
        m = self.model
        obs, next_obs, not_done, alpha = self._transition(batch)
        actor_obs, target_next_obs = obs, next_obs
        if self.state_preprocessor:
            obs, actor_obs, next_obs, target_next_obs = self._state_features(obs, next_obs)

        # a ~ pi(.|s) by reparameterisation (a = tanh(mean + std * eps), or a Beta's sample).
        actions_pi, logp_pi = self.actor_sample(
            m.get_policy_output(actor_obs), self.deterministic_loss
        )

        # Critics: y = r + gamma^n (1 - terminated) (min_j Q'_j(s', a') - alpha log pi(a'|s')),
        # a' ~ pi(.|s'); J(Q_i) = E[1/2 (Q_i(s, a) - y)^2] (eqs. 5-6 of 1801.01290).
        with torch.no_grad():
            next_actions, next_logp = self.actor_sample(
                m.get_policy_output(next_obs), self.deterministic_loss
            )
            next_q_in = torch.cat([target_next_obs, next_actions], -1)
            next_q = self.target_q(next_q_in).squeeze(-1).amin(0)
            discount = bootstrap_discount(batch, self.gamma)
            target = batch[SampleBatch.REWARDS] + discount * not_done * (next_q - alpha * next_logp)
        q = m.q_ensemble(obs, batch[SampleBatch.ACTIONS])
        td_error = q - target
        critic_losses = 0.5 * (self._prio_weights(batch) * td_error.pow(2)).mean(-1)

        # Actor: J(pi) = E[alpha log pi(a|s) - min_j Q_j(s, a)] (eq. 12 of 1801.01290),
        # the gradient reaching the policy through a; it does not train the critics.
        q_pi = m.q_ensemble(actor_obs, actions_pi, detach_params=True).amin(0)
        actor_loss = (alpha * logp_pi - q_pi).mean()

        # Temperature: J(alpha) = E[-alpha (log pi(a|s) + H_target)] (eq. 18 of 1812.05905),
        # in log space so that alpha stays positive.
        alpha_loss = -(m.log_alpha * (logp_pi.detach() + m.target_entropy)).mean()

        losses = (actor_loss, critic_losses, alpha_loss)
        return _stats(losses, alpha, -logp_pi.mean(), q, td_error)

    def _losses_discrete(self, batch: TensorDict) -> dict[str, torch.Tensor]:
        m = self.model
        obs, next_obs, not_done, alpha = self._transition(batch)
        actor_obs, target_next_obs = obs, next_obs
        if self.state_preprocessor:
            obs, actor_obs, next_obs, target_next_obs = self._state_features(obs, next_obs)

        # With finitely many actions, expectations over pi are exact sums (Christodoulou 2019).
        log_pi = torch.log_softmax(m.get_policy_output(actor_obs), dim=-1)
        pi = log_pi.exp()
        neg_entropy = (pi * log_pi).sum(-1)

        # Critics: y = r + gamma^n (1 - terminated) V'(s'),
        # V'(s') = sum_a' pi(a'|s') (min_j Q'_j(s', a') - alpha log pi(a'|s')) (eq. 10).
        with torch.no_grad():
            next_log_pi = torch.log_softmax(m.get_policy_output(next_obs), dim=-1)
            next_q = self.target_q(target_next_obs).amin(0)
            next_v = (next_log_pi.exp() * (next_q - alpha * next_log_pi)).sum(-1)
            discount = bootstrap_discount(batch, self.gamma)
            target = batch[SampleBatch.REWARDS] + discount * not_done * next_v
        q_all = m.q_ensemble(obs)
        index = batch[SampleBatch.ACTIONS].long().view(1, -1, 1).expand(q_all.shape[0], -1, 1)
        q = q_all.gather(-1, index).squeeze(-1)
        td_error = q - target
        critic_losses = 0.5 * (self._prio_weights(batch) * td_error.pow(2)).mean(-1)

        # Actor: J(pi) = E_s[sum_a pi(a|s) (alpha log pi(a|s) - min_j Q_j(s, a))] (eq. 12).
        q_min = q_all.detach().amin(0)
        actor_loss = (pi * (alpha * log_pi - q_min)).sum(-1).mean()

        # Temperature: J(alpha) = E_s[-alpha (sum_a pi log pi + H_target)] (eq. 11).
        alpha_loss = -(m.log_alpha * (neg_entropy.detach() + m.target_entropy)).mean()

        losses = (actor_loss, critic_losses, alpha_loss)
        return _stats(losses, alpha, -neg_entropy.mean(), q, td_error)

    def _transition(
        self, batch: TensorDict
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(s, s', 1 - terminated, alpha) of a batch: flat float observations, and the
        temperature without a gradient."""
        obs = flatten_obs(batch[SampleBatch.OBS])
        next_obs = flatten_obs(batch[SampleBatch.NEXT_OBS])
        not_done = 1.0 - batch[SampleBatch.TERMINATEDS].float()
        return obs, next_obs, not_done, self.model.log_alpha.detach().exp()

    def _state_features(
        self, obs: torch.Tensor, next_obs: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The heads' inputs with a state preprocessor: (the critics' s, which trains it;
        the actor's s, detached; the actor's s' and the target critics' s', both without
        a gradient, from the model's and the target model's state preprocessors)."""
        critic_in, actor_in, target_next_in = preprocessed_transition(
            self.model, self.target_model, obs, next_obs
        )
        with torch.no_grad():
            next_in = self.model.state_features(next_obs)
        return critic_in, actor_in, next_in, target_next_in

    @staticmethod
    def _prio_weights(batch: TensorDict) -> torch.Tensor | float:
        weights = batch.get(PRIO_WEIGHTS)
        return 1.0 if weights is None else weights.float()

    def target_source(self) -> torch.nn.Module:
        """The critics (`update_target` moves the target critics towards them); with a
        state preprocessor the whole model, which the target critics read through."""
        if self.state_preprocessor:
            return self.model
        return self.model.q_net

    def td_errors(self, batch: SampleBatch) -> np.ndarray:
        """|TD error| of the first critic per transition (for prioritized replay)."""
        m = self.model
        t = self.replay_tensors(batch)
        with torch.no_grad():
            obs, next_obs, not_done, alpha = self._transition(t)
            target_next_obs = next_obs
            if self.state_preprocessor:
                obs, _, next_obs, target_next_obs = self._state_features(obs, next_obs)
            next_inputs = m.get_policy_output(next_obs)
            if self.discrete:
                next_log_pi = torch.log_softmax(next_inputs, dim=-1)
                next_q = self.target_q(target_next_obs).amin(0)
                next_v = (next_log_pi.exp() * (next_q - alpha * next_log_pi)).sum(-1)
                q = m.q_ensemble(obs, members=FIRST)[0]
                q = q.gather(-1, t[SampleBatch.ACTIONS].long().unsqueeze(-1)).squeeze(-1)
            else:
                next_actions, next_logp = self.actor_sample(next_inputs)
                q_in = torch.cat([target_next_obs, next_actions], -1)
                next_v = self.target_q(q_in).squeeze(-1).amin(0) - alpha * next_logp
                q = m.q_ensemble(obs, t[SampleBatch.ACTIONS], members=FIRST)[0]
            discount = bootstrap_discount(t, self.gamma)
            target = t[SampleBatch.REWARDS] + discount * not_done * next_v
        return (q - target).abs().numpy()


def _stats(
    losses: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    alpha: torch.Tensor,
    entropy: torch.Tensor,
    q: torch.Tensor,
    td_error: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """The three losses (`learn_step` sums them; `critic_losses`: one per critic, [E]) and
    what one SAC update reports."""
    actor_loss, critic_losses, alpha_loss = losses
    return {
        "actor_loss": actor_loss,
        "critic_loss": critic_losses.sum(),
        "critic_losses": critic_losses,
        "alpha_loss": alpha_loss,
        "alpha_value": alpha[0],
        "entropy": entropy,
        "mean_q": q.mean(),
        "mean_td_error": td_error.abs().mean(),
    }


# -- RLlib 1.13's function forms of SAC's policy ---------------------------------------
# RLlib built `SACTorchPolicy` from these functions; here each is computed by corral's
# class, for composing custom policies (`SACTorchPolicy.with_updates(loss_fn=...)`).


def build_sac_model_and_action_dist(
    policy: SACTorchPolicy, obs_space: gym.Space, action_space: gym.Space, config: dict
) -> tuple[torch.nn.Module, type]:
    """RLlib 1.13's `(SAC model, action distribution class)`: a new model as the policy's
    class builds it (`make_model`, from the policy's own config) and the actor's
    distribution (`SACTorchPolicy.action_dist_class`). The policy's own model and target
    critics exist already (built in `__init__`); this leaves them as they are."""
    return policy.make_model(0), policy.action_dist_class()


def action_distribution_fn(
    policy: SACTorchPolicy,
    model: torch.nn.Module,
    input_dict: Any,
    *,
    state_batches: list | None = None,
    seq_lens: Any = None,
    prev_action_batch: Any = None,
    prev_reward_batch: Any = None,
    explore: bool | None = None,
    timestep: int | None = None,
    is_training: bool | None = None,
) -> tuple[torch.Tensor, type, list]:
    """RLlib 1.13's `(distribution inputs, distribution class, state_out)` of the actor for
    the observations of `input_dict`: what the policy samples its actions from."""
    obs = input_dict[SampleBatch.OBS] if isinstance(input_dict, dict) else input_dict
    obs = flatten_obs(torch.as_tensor(np.asarray(obs) if not torch.is_tensor(obs) else obs))
    return policy.actor_inputs(model, obs), policy.action_dist_class(), []


def actor_critic_loss(
    policy: SACTorchPolicy, model: torch.nn.Module, dist_class: Any, train_batch: TensorDict
) -> tuple[torch.Tensor, ...]:
    """RLlib 1.13's SAC losses on a minibatch: `(actor_loss, critic_loss per critic...,
    alpha_loss)` (CQL: then `alpha_prime_loss`), the terms of the policy's class
    (`loss_terms`, whose losses `SACTorchPolicy.loss` sums); its stats go to
    `model.tower_stats`, read by `stats`. Their sum is the loss `learn_step` trains on;
    the losses train disjoint parameters. RNNSAC's and CQL's policies compute theirs
    through their own `loss_terms`."""
    terms = policy.loss_terms(train_batch)
    critic_losses = terms.pop("critic_losses")
    store_tower_stats(model, terms)
    rest = [terms[name] for name in policy.loss_names[2:]]
    return (terms["actor_loss"], *critic_losses.unbind(0), *rest)


def stats(policy: SACTorchPolicy, train_batch: Any) -> dict[str, Any]:
    """The stats of the policy's last `actor_critic_loss` (losses, `alpha_value`,
    `entropy`, `mean_q`, `mean_td_error`), detached."""
    return tower_stats(policy, train_batch)


def optimizer_fn(policy: SACTorchPolicy, config: dict) -> torch.optim.Optimizer:
    """The optimiser the policy's class trains with: one fused Adam with a parameter
    group each for the actor, the critics and alpha, at their `optimization` learning
    rates (RLlib 1.13 returned three Adams; one step of this one is the same three
    updates). The policy's config is read (`config` is that config in RLlib's calls)."""
    return own_class(policy).make_optimizer(policy)


__all__ = [
    "ComputeTDErrorMixin",
    "SACTorchPolicy",
    "TargetNetworkMixin",
    "action_distribution_fn",
    "actor_critic_loss",
    "beta_sample",
    "build_sac_model_and_action_dist",
    "optimizer_fn",
    "setup_late_mixins",
    "squashed_gaussian_sample",
    "stats",
]
