"""CQL's policy on SAC: conservative critics, and behaviour cloning for the first steps.

Kumar et al. 2020, "Conservative Q-Learning for Offline Reinforcement Learning"
(arXiv:2006.04779), the CQL(H) variant of its eq. 4 as RLlib 1.13 builds it on SAC. Each
critic Q_j gets, on top of its TD loss to the (entropy-free) target
y = r + gamma^n (1 - terminated) min_j Q'_j(s', a'), a' ~ pi(.|s'), the regulariser

    min_q_weight * (T * E_s[log sum_{a_k} exp(Q_j(s, a_k) / T)] - E_(s,a)~D[Q_j(s, a)]),

the log-sum-exp taken over `num_actions` actions each from a uniform proposal, from pi(.|s)
and from pi(.|s'), each corrected by its log-density (importance-sampled log-sum-exp,
appendix F), T = `temperature`. It pushes Q down on actions the data does not show and up on
the data's. With `lagrangian`, the weight is a learned alpha' >= 0 holding the gap at
`lagrangian_thresh` (eq. 5). For the first `bc_iters` gradient steps the actor maximises the
likelihood of the data's actions (plus SAC's entropy term) instead of Q.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import torch
import torch.nn.functional as F  # noqa: N812, F401 - RLlib 1.13's `F` re-export
from torch import nn

from corral.agents.dqn.dqn_torch_policy import own_class
from corral.agents.sac import SACTorchPolicy
from corral.agents.sac.sac_torch_policy import setup_late_mixins, squashed_gaussian_sample
from corral.models.torch.mlp import flatten_obs
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_mixins import bootstrap_discount
from corral.policy.torch_policy import TensorDict
from corral.utils.error import UnsupportedSpaceException
from corral.utils.metrics.learner_info import LEARNER_STATS_KEY

# Bounds of the Gaussian's pre-tanh mean when scoring the data's actions (RLlib's clamps).
MEAN_MIN = -9.0
MEAN_MAX = 9.0
# Squashed actions are kept this far inside (-1, 1) before atanh.
_ATANH_EPS = 1e-6


def squashed_gaussian_logp(dist_inputs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """log pi(a|s) of given actions a in (-1, 1) under the tanh-squashed Gaussian."""
    mean, log_std = dist_inputs.chunk(2, dim=-1)
    mean = mean.clamp(MEAN_MIN, MEAN_MAX)
    a = actions.clamp(-1.0 + _ATANH_EPS, 1.0 - _ATANH_EPS)
    u = torch.atanh(a)
    z = (u - mean) / log_std.exp()
    gaussian = -0.5 * z.pow(2) - log_std - 0.5 * math.log(2.0 * math.pi)
    return (gaussian - torch.log1p(-a.pow(2))).sum(-1)


def policy_actions_repeat(
    model: Any, action_dist_class: Any, obs: torch.Tensor, num_repeat: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """`num_repeat` actions from pi(.|s) per observation: `([B*N, dim(A)], [B, N] log pi)`.

    Rows are grouped per observation (row i*N+k is the k-th action of observation i).
    `action_dist_class` is accepted for RLlib's signature (the squashed Gaussian is SAC's).
    """
    obs_rep = obs.repeat_interleave(num_repeat, 0)
    actions, logp = squashed_gaussian_sample(model.get_policy_output(obs_rep))
    return actions, logp.view(len(obs), num_repeat)


def q_values_repeat(
    model: Any, obs: torch.Tensor, actions: torch.Tensor, twin: bool = False
) -> torch.Tensor:
    """Q(s, a) of every critic for N actions per observation: `[E, B, N]` (E critics).

    `twin` is accepted for RLlib's signature: all critics are evaluated at once.
    """
    num_repeat = len(actions) // len(obs)
    obs_rep = obs.repeat_interleave(num_repeat, 0)
    return model.q_ensemble(obs_rep, actions).view(-1, len(obs), num_repeat)


def cql_loss(
    policy: CQLTorchPolicy, model: Any, dist_class: Any, train_batch: TensorDict
) -> dict[str, torch.Tensor]:
    """CQL's terms on one minibatch (see the module docstring): `actor_loss`,
    `critic_loss`, `alpha_loss`, `alpha_prime_loss` and stats, all tensors."""
    cfg = policy.config
    obs = flatten_obs(train_batch[SampleBatch.OBS])
    next_obs = flatten_obs(train_batch[SampleBatch.NEXT_OBS])
    actor_obs, target_next_obs = obs, next_obs
    if policy.state_preprocessor:
        # SAC's inputs (`SACTorchPolicy._state_features`): the critics' TD and
        # conservative terms train the state preprocessor, the actor reads it detached.
        obs, actor_obs, next_obs, target_next_obs = policy._state_features(obs, next_obs)
    actions = train_batch[SampleBatch.ACTIONS].float().view(len(obs), -1)
    rewards = train_batch[SampleBatch.REWARDS].float()
    not_done = 1.0 - train_batch[SampleBatch.TERMINATEDS].float()
    alpha = model.log_alpha.detach().exp()
    num_actions = int(cfg["num_actions"])
    temperature = float(cfg["temperature"])
    min_q_weight = float(cfg["min_q_weight"])

    # Actor and temperature (SAC's), the actor cloning the data for the first bc_iters.
    dist_inputs = model.get_policy_output(actor_obs)
    actions_pi, logp_pi = squashed_gaussian_sample(dist_inputs, policy.deterministic_loss)
    if policy.cur_iter < cfg["bc_iters"]:
        bc_logp = squashed_gaussian_logp(dist_inputs, actions)
        actor_loss = (alpha * logp_pi - bc_logp).mean()
    else:
        q_pi = model.q_ensemble(actor_obs, actions_pi, detach_params=True).amin(0)
        actor_loss = (alpha * logp_pi - q_pi).mean()
    alpha_loss = -(model.log_alpha * (logp_pi.detach() + model.target_entropy)).mean()

    # Critics' TD loss (RLlib 1.13's CQL target carries no entropy term).
    with torch.no_grad():
        next_actions, _ = squashed_gaussian_sample(model.get_policy_output(next_obs))
        q_next_in = torch.cat([target_next_obs, next_actions], -1)
        q_next = policy.target_q(q_next_in).squeeze(-1).amin(0)
        discount = bootstrap_discount(train_batch, policy.gamma)
        target = rewards + discount * not_done * q_next
    q_data = model.q_ensemble(obs, actions)  # [E, B]
    td_error = q_data - target
    td_loss = (0.5 * td_error.pow(2)).mean(-1)  # [E]

    # The conservative term: importance-sampled log-sum-exp over proposal actions.
    action_dim = actions.shape[-1]
    with torch.no_grad():
        random_actions = torch.empty(len(obs) * num_actions, action_dim).uniform_(-1.0, 1.0)
        curr_actions, curr_logp = policy_actions_repeat(model, dist_class, obs, num_actions)
        next_rep_actions, next_logp = policy_actions_repeat(
            model, dist_class, next_obs, num_actions
        )
    random_density = action_dim * math.log(0.5)  # log of the uniform density on [-1, 1]^d
    q_rand = q_values_repeat(model, obs, random_actions)
    q_curr = q_values_repeat(model, obs, curr_actions)
    q_next_actions = q_values_repeat(model, obs, next_rep_actions)
    cat_q = torch.cat(
        [q_rand - random_density, q_next_actions - next_logp, q_curr - curr_logp], dim=-1
    )  # [E, B, 3N]
    logsumexp = torch.logsumexp(cat_q / temperature, dim=-1).mean(-1) * temperature  # [E]
    gap = (logsumexp - q_data.mean(-1)) * min_q_weight  # [E]
    if cfg["lagrangian"]:
        alpha_prime = model.log_alpha_prime.exp().clamp(0.0, 1e6)
        # alpha' grows while the gap exceeds the threshold; the critics see it as a
        # constant, alpha' sees the gap as one (disjoint gradients in one backward).
        conservative = alpha_prime.detach() * (gap - cfg["lagrangian_thresh"])
        alpha_prime_loss = -(alpha_prime * (gap.detach() - cfg["lagrangian_thresh"])).mean()
    else:
        alpha_prime = torch.zeros(1)
        conservative = gap
        alpha_prime_loss = torch.zeros(())
    critic_losses = td_loss + conservative  # [E]
    return {
        "actor_loss": actor_loss,
        "critic_loss": critic_losses.sum(),
        "critic_losses": critic_losses,
        "alpha_loss": alpha_loss,
        "alpha_prime_loss": alpha_prime_loss,
        "cql_loss": gap.mean(),
        "td_loss": td_loss.mean(),
        "alpha_value": alpha[0],
        "alpha_prime_value": alpha_prime.detach().reshape(-1)[0],
        "entropy": -logp_pi.mean(),
        "mean_q": q_data.mean(),
        "mean_td_error": td_error.abs().mean(),
    }


def cql_stats(policy: CQLTorchPolicy, train_batch: TensorDict) -> dict[str, float]:
    """The stats of the last gradient step (RLlib 1.13's `cql_stats`)."""
    return dict(policy.last_stats)


class CQLTorchPolicy(SACTorchPolicy):
    """SAC with CQL's conservative critics and behaviour-cloning warm-up (Box actions)."""

    beta_distribution_built = False

    @staticmethod
    def get_default_config() -> dict:
        """CQL's `DEFAULT_CONFIG` (the keys this policy reads under another trainer)."""
        from corral.agents.cql.cql import CQL_DEFAULT_CONFIG

        return CQL_DEFAULT_CONFIG

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        if not isinstance(action_space, gym.spaces.Box):
            raise UnsupportedSpaceException(
                f"CQL on SAC needs a Box action space, got {action_space}; for Discrete "
                "actions use CQL on DQN (corral.agents.cql.CQLDQNTrainer, 'CQL_DQN')."
            )
        super().__init__(observation_space, action_space, config)
        if config["lagrangian"]:
            # alpha' trains with the others (RLlib's fourth loss).
            self.loss_names = (*SACTorchPolicy.loss_names, "alpha_prime_loss")
        # Gradient steps taken (the behaviour-cloning phase lasts `bc_iters` of them).
        self.cur_iter = 0
        self.last_stats: dict[str, float] = {}

    def make_model(self, num_outputs: int) -> Any:
        model = super().make_model(num_outputs)
        if self.config["lagrangian"]:
            # On the model, so that weights and checkpoints carry it.
            model.log_alpha_prime = nn.Parameter(torch.zeros(1))
        return model

    def make_optimizer(self) -> torch.optim.Optimizer:
        """SAC's optimiser, plus a parameter group for alpha' (at the critics' learning
        rate) with `lagrangian`."""
        optimizer = super().make_optimizer()
        if self.config["lagrangian"]:
            optimizer.add_param_group(
                {
                    "params": [self.model.log_alpha_prime],
                    "lr": self.config["optimization"]["critic_learning_rate"],
                    "name": "alpha_prime",
                }
            )
        return optimizer

    def loss_terms(self, batch: TensorDict) -> dict[str, torch.Tensor]:
        """CQL's losses and stats on a minibatch (`cql_loss`)."""
        return cql_loss(self, self.model, self.dist_class, batch)

    def learn_step(self, batch: TensorDict, optimizer: torch.optim.Optimizer) -> dict:
        """One CQL gradient step (SAC's: the losses touch disjoint parameters, so one
        backward pass of their sum gives each group its own loss's gradient)."""
        stats = super().learn_step(batch, optimizer)
        self.cur_iter += 1
        self.last_stats = {
            k: float(v)
            for k, v in stats.items()
            if torch.is_tensor(v) or isinstance(v, (int, float))
        }
        return stats

    def extra_state(self) -> dict[str, Any]:
        return {**super().extra_state(), "cur_iter": self.cur_iter}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        super().set_extra_state(state)
        self.cur_iter = int(state.get("cur_iter", self.cur_iter))


# -- RLlib 1.13's function forms of CQL's policy ---------------------------------------
# (`cql_loss` and `cql_stats` above; `policy_actions_repeat` / `q_values_repeat` too.)


def cql_optimizer_fn(policy: CQLTorchPolicy, config: dict) -> torch.optim.Optimizer:
    """The optimiser CQL's policy trains with: SAC's fused Adam (actor, critics, alpha
    groups) plus an alpha' group at the critics' learning rate with `lagrangian` (RLlib
    1.13 returned one Adam per loss). The policy's config is read (`config` is that
    config in RLlib's calls). Unlike RLlib's, it does not reset `cur_iter`: the policy
    counts its gradient steps from `__init__`."""
    return own_class(policy).make_optimizer(policy)


def cql_setup_late_mixins(
    policy: CQLTorchPolicy, obs_space: gym.Space, action_space: gym.Space, config: dict
) -> None:
    """RLlib 1.13's `before_loss_init` of CQL: SAC's `setup_late_mixins` (the target
    critics as a copy of the critics). alpha' (`lagrangian`) is a parameter of the model
    already, so it is on the model's device."""
    setup_late_mixins(policy, obs_space, action_space, config)


def compute_gradients_fn(
    policy: CQLTorchPolicy, postprocessed_batch: SampleBatch
) -> tuple[None, dict[str, Any]]:
    """RLlib 1.13's CQL `compute_gradients`: CQL steps its optimisers inside its update,
    so this trains the policy on the batch (one `learn_on_batch`) and returns no
    gradients: `(None, {"learner_stats": stats})`. `apply_gradients_fn` then has
    nothing to apply."""
    info = policy.learn_on_batch(postprocessed_batch)
    return None, {LEARNER_STATS_KEY: info[LEARNER_STATS_KEY]}


def apply_gradients_fn(policy: CQLTorchPolicy, gradients: Any) -> None:
    """RLlib 1.13's CQL `apply_gradients`: nothing to apply, `compute_gradients_fn`
    already stepped the optimisers (RLlib's returned without doing anything too)."""
    return None
