"""Dreamer's policy: the world-model, actor and critic losses, and acting with the RSSM state.

Hafner et al. 2020, "Dream to Control: Learning Behaviors by Latent Imagination" (ICLR,
arXiv:1912.01603), as RLlib 1.13's `DreamerTorchPolicy`. One gradient step (`learn_step`)
on a batch of B replayed chunks of T steps, each step (o_t, a_{t-1}, r_{t-1}) (see
`preprocess_episode`):

- world model (PlaNet's objective, eq. 10 of the paper's appendix): the posterior states
  along each chunk; the frames' and rewards' negative log-likelihoods under the decoder
  and the reward head (unit-variance Gaussians), plus `kl_coeff` times the KL divergence
  KL(posterior || prior) summed over z's dimensions, averaged over the steps, and raised
  to at least `free_nats` (below it the KL term has no gradient: free nats);
- actor (sec. 3-4): from every posterior state (detached), `imagine_horizon` steps of the
  actor in the frozen world model; lambda-returns V_lambda of the imagined rewards and
  values (eq. 6, `lambda_return`); the loss is minus their mean, each step weighted by
  discount^k. Its gradient reaches the actor only, through the reparameterised actions;
- critic (eq. 8): the value network's Gaussian log-likelihood of the lambda-returns
  (stopped gradients) on the imagined features (detached), with the same weights.

The three losses train disjoint parameters (world model, actor, value network), each with
its own Adam (`td_model_lr`, `actor_lr`, `critic_lr`); one backward pass of their sum gives
each its own gradient, clipped per network to `grad_clip`.
"""

from __future__ import annotations

import math
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
from torch import distributions as td

from corral.agents.dreamer.dreamer_model import DreamerModel, image_layout
from corral.agents.dreamer.utils import FreezeParameters
from corral.models.catalog import ModelCatalog
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_mixins import clip_and_step
from corral.policy.torch_policy import TensorDict, TorchPolicy
from corral.utils.error import UnsupportedSpaceException
from corral.utils.metrics.learner_info import LEARNER_STATS_KEY
from corral.utils.numpy import convert_to_numpy
from corral.utils.spaces import is_int_box
from corral.utils.torch_utils import make_adam

# The batch key that asks `dreamer_loss` for a video summary (RLlib 1.13's).
LOG_GIF = "log_gif"


def compute_dreamer_loss(
    obs: torch.Tensor,
    action: torch.Tensor,
    reward: torch.Tensor,
    model: DreamerModel,
    imagine_horizon: int,
    discount: float = 0.99,
    lambda_: float = 0.95,
    kl_coeff: float = 1.0,
    free_nats: float = 3.0,
    log: bool = False,
) -> dict[str, torch.Tensor]:
    """Dreamer's three losses on chunks of B sequences of T steps (see the module docstring).

    Args:
        obs: frames o_t `[B, T, C, 64, 64]` in [-0.5, 0.5] (`DreamerModel.preprocess_obs`).
        action: actions a_{t-1} `[B, T, A]` (zeros at an episode's first step).
        reward: rewards r_{t-1} `[B, T]`.
        model: the `DreamerModel`.
        imagine_horizon: imagined steps (>= 2) for the actor and critic losses.
        discount: discount of the imagined rewards.
        lambda_: lambda of the lambda-returns.
        kl_coeff: weight of the KL term of the world-model loss.
        free_nats: the KL term's floor.
        log: also return a video summary under "log_gif" (`log_summary`).

    Returns:
        `model_loss`, `actor_loss`, `critic_loss` (the three losses), and for logging
        `reward_loss`, `image_loss`, `divergence` (the KL term after the floor),
        `prior_ent`, `post_ent` (mean entropies of the prior and the posterior).
    """
    model_weights = [
        p
        for net in (model.encoder, model.decoder, model.reward, model.dynamics)
        for p in net.parameters()
    ]
    critic_weights = list(model.value.parameters())

    # World model: reconstruction, reward prediction and the KL term with free nats.
    embed = model.encoder(obs)
    post, prior = model.dynamics.observe(embed, action)
    features = model.dynamics.get_feature(post)
    image_pred = model.decoder(features)
    reward_pred = model.reward(features)
    image_loss = -image_pred.log_prob(obs).mean()
    reward_loss = -reward_pred.log_prob(reward).mean()
    prior_dist = model.dynamics.get_dist(prior[0], prior[1])
    post_dist = model.dynamics.get_dist(post[0], post[1])
    divergence = td.kl_divergence(post_dist, prior_dist).sum(dim=2).mean()
    divergence = divergence.clamp(min=free_nats)
    model_loss = kl_coeff * divergence + reward_loss + image_loss

    # Actor: imagined rollouts in the frozen world model, valued by the frozen critic.
    with FreezeParameters(model_weights):
        imag_feat = model.imagine_ahead(post, imagine_horizon)
    with FreezeParameters(model_weights + critic_weights):
        imag_reward = model.reward(imag_feat).mean
        imag_value = model.value(imag_feat).mean
    pcont = discount * torch.ones_like(imag_reward)
    returns = lambda_return(imag_reward[:-1], imag_value[:-1], pcont[:-1], imag_value[-1], lambda_)
    # Step k of the imagined trajectories weighs discount^k.
    weights = torch.cumprod(torch.cat([torch.ones_like(pcont[:1]), pcont[:-2]], dim=0), dim=0)
    actor_loss = -(weights * returns).mean()

    # Critic: regress the value of the (detached) imagined features on the returns.
    value_pred = model.value(imag_feat.detach()[:-1])
    critic_loss = -(weights.detach() * value_pred.log_prob(returns.detach())).mean()

    out = {
        "model_loss": model_loss,
        "reward_loss": reward_loss,
        "image_loss": image_loss,
        "divergence": divergence,
        "actor_loss": actor_loss,
        "critic_loss": critic_loss,
        "prior_ent": prior_dist.entropy().mean(),
        "post_ent": post_dist.entropy().mean(),
    }
    if log:
        out[LOG_GIF] = log_summary(obs, action, embed, image_pred, model)
    return out


def lambda_return(
    reward: torch.Tensor,
    value: torch.Tensor,
    pcont: torch.Tensor,
    bootstrap: torch.Tensor,
    lambda_: float,
) -> torch.Tensor:
    """The lambda-returns of trajectories (eq. 6 of Hafner et al. 2020), time first:

        R_t = r_t + pcont_t * ((1 - lambda) v_{t+1} + lambda R_{t+1}),  R_T = bootstrap,

    with v_{t+1} the next row of `value` (`bootstrap` after the last one).

    Args:
        reward: rewards `[T, ...]`.
        value: value estimates `[T, ...]` of the same steps' states.
        pcont: discounts `[T, ...]` (gamma times the probability to continue).
        bootstrap: the value `[...]` of the state after the last step.
        lambda_: lambda in [0, 1] (0: one-step TD targets, 1: discounted returns).

    Returns:
        The returns `[T, ...]`.
    """
    next_values = torch.cat([value[1:], bootstrap[None]], dim=0)
    one_step = reward + pcont * next_values * (1.0 - lambda_)
    returns = []
    last = bootstrap
    for t in reversed(range(len(reward))):
        last = one_step[t] + pcont[t] * lambda_ * last
        returns.append(last)
    return torch.stack(returns[::-1], dim=0)


def log_summary(
    obs: torch.Tensor,
    action: torch.Tensor,
    embed: torch.Tensor,
    image_pred: td.Distribution,
    model: DreamerModel,
    context: int = 5,
) -> torch.Tensor:
    """A video summary of the world model on up to 6 chunks: the true frames, the model's
    frames (its reconstructions for the first `context` steps, then its open-loop
    predictions from the actions alone) and their error, stacked along the height.

    Returns:
        Frames `[min(B, 6), T, C, 3 * 64, 64]` in [0, 1].

    Raises:
        ValueError: chunks of fewer than 2 steps (nothing to predict).
    """
    if obs.shape[1] < 2:
        raise ValueError(f"log_summary needs chunks of at least 2 steps, got {obs.shape[1]}.")
    context = max(1, min(context, obs.shape[1] - 1))
    truth = obs[:6] + 0.5
    recon = image_pred.mean[:6]
    init, _ = model.dynamics.observe(embed[:6, :context], action[:6, :context])
    prior = model.dynamics.imagine(action[:6, context:], [s[:, -1] for s in init])
    openl = model.decoder(model.dynamics.get_feature(prior)).mean
    predicted = torch.cat([recon[:, :context] + 0.5, openl + 0.5], dim=1)
    error = (predicted - truth + 1.0) / 2.0
    return torch.cat([truth, predicted, error], dim=3)


def dreamer_loss(
    policy: DreamerTorchPolicy, model: DreamerModel, dist_class: Any, train_batch: TensorDict
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(model_loss, actor_loss, critic_loss) of a train batch of chunks (`obs`, `actions`,
    `rewards`, `[B, T, ...]`, observations as the env gives them); keeps every term in
    `policy.stats_dict` (with a video under "log_gif" when the batch has that key)."""
    cfg = policy.config
    policy.stats_dict = compute_dreamer_loss(
        model.preprocess_obs(train_batch[SampleBatch.OBS]),
        train_batch[SampleBatch.ACTIONS].float(),
        train_batch[SampleBatch.REWARDS].float(),
        model,
        int(cfg["imagine_horizon"]),
        float(cfg["discount"]),
        float(cfg["lambda"]),
        float(cfg["kl_coeff"]),
        float(cfg["free_nats"]),
        LOG_GIF in train_batch,
    )
    stats = policy.stats_dict
    return stats["model_loss"], stats["actor_loss"], stats["critic_loss"]


def build_dreamer_model(
    policy: TorchPolicy, obs_space: gym.Space, action_space: gym.Space, config: dict
) -> DreamerModel:
    """The policy's model from `config["dreamer_model"]` (its `custom_model`, by default
    `DreamerModel`, through the model catalog)."""
    model = ModelCatalog.get_model_v2(
        obs_space, action_space, 1, config["dreamer_model"], framework="torch", name="DreamerModel"
    )
    return cast(DreamerModel, model)


def action_sampler_fn(
    policy: TorchPolicy,
    model: DreamerModel,
    input_dict: dict[str, torch.Tensor],
    state: list[torch.Tensor] | None,
    explore: bool,
    timestep: int,
) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    """Dreamer's acting: uniform random actions in [-1, 1] while exploring before
    `prefill_timesteps` env frames (the state stays the initial one); afterwards the
    actor's action after the posterior update on `input_dict["obs"]`, with Gaussian noise
    of std `explore_noise` added (and clipped to [-1, 1]) when exploring.

    Returns:
        (actions `[B, A]`, log-densities `[B]` (the actor's, of its action before the
        noise), the new state `[mean, std, stoch, deter, action]`, whose action is the one
        returned: the action executed).
    """
    cfg = policy.config
    obs = input_dict[SampleBatch.OBS]
    n = obs.shape[0]
    if explore and timestep < cfg["prefill_timesteps"]:
        action = 2.0 * torch.rand(n, model.action_size, device=obs.device) - 1.0
        logp = torch.full((n,), -model.action_size * math.log(2.0), device=obs.device)
        return action, logp, model.initial_state(n)
    action, logp, state = model.policy(obs, state, explore)
    if explore:
        action = td.Normal(action, cfg["explore_noise"]).sample().clamp(-1.0, 1.0)
        state = [*state[:4], action]
    return action, logp, state


def dreamer_stats(policy: DreamerTorchPolicy, train_batch: TensorDict) -> dict[str, Any]:
    """The terms of the last loss (RLlib's `stats_fn`)."""
    return policy.stats_dict


def dreamer_optimizer_fn(
    policy: TorchPolicy, config: dict
) -> tuple[torch.optim.Optimizer, torch.optim.Optimizer, torch.optim.Optimizer]:
    """Three Adams: the world model's (encoder, decoder, reward head and RSSM) with
    `td_model_lr`, the actor's with `actor_lr`, the value network's with `critic_lr`."""
    model = cast(DreamerModel, policy.model)
    world_model = [
        p
        for net in (model.encoder, model.decoder, model.reward, model.dynamics)
        for p in net.parameters()
    ]
    options = config.get("optimizer")
    return (
        make_adam(world_model, options, lr=config["td_model_lr"]),
        make_adam(model.actor.parameters(), options, lr=config["actor_lr"]),
        make_adam(model.value.parameters(), options, lr=config["critic_lr"]),
    )


def preprocess_episode(
    policy: Any,
    sample_batch: SampleBatch,
    other_agent_batches: dict | None = None,
    episode: Any = None,
) -> SampleBatch:
    """One episode's steps as Dreamer's world model reads them: (o_t, a_{t-1}, r_{t-1}) for
    t = 0..T, the reset observation paired with a zero action and reward, the last step's
    next observation with the last action and reward (T + 1 rows).

    Args:
        policy: unused (RLlib's postprocessing signature).
        sample_batch: the steps (`obs`, `new_obs`, `actions`, `rewards`, `eps_id`) of
            one episode.

    Returns:
        A batch with `obs`, `actions`, `rewards` and `eps_id`.
    """
    obs = sample_batch[SampleBatch.OBS]
    actions = np.asarray(sample_batch[SampleBatch.ACTIONS], np.float32)
    rewards = np.asarray(sample_batch[SampleBatch.REWARDS], np.float32)
    eps_id = sample_batch[SampleBatch.EPS_ID]
    return SampleBatch(
        {
            SampleBatch.OBS: np.concatenate([obs, sample_batch[SampleBatch.NEXT_OBS][-1:]]),
            SampleBatch.ACTIONS: np.concatenate([np.zeros_like(actions[:1]), actions]),
            SampleBatch.REWARDS: np.concatenate([np.zeros(1, np.float32), rewards]),
            SampleBatch.EPS_ID: np.concatenate([eps_id, eps_id[-1:]]),
        }
    )


class DreamerTorchPolicy(TorchPolicy):
    """Dreamer for image observations and 1-D Box actions (in [-1, 1], stretched onto the
    env's bounds).

    Its recurrent state is `[mean, std, stoch, deter, action]` (see `DreamerModel`); the
    trainer's replayed chunks, one whole sequence per train-batch row, are trained on as
    they are (`trains_on_sequence_rows`).
    """

    trains_on_sequence_rows = True
    # The model reads the observations as the env gives them (images are not flattened).
    raw_observations_built = True
    # (A batch with a `LOG_GIF` column also gets the loss's video summary, `learn_on_batch`.)
    train_columns: tuple[str, ...] = (
        SampleBatch.OBS,
        SampleBatch.ACTIONS,
        SampleBatch.REWARDS,
        LOG_GIF,
    )

    @staticmethod
    def get_default_config() -> dict:
        """Dreamer's `DEFAULT_CONFIG` (the keys this policy reads)."""
        from corral.agents.dreamer.dreamer import DEFAULT_CONFIG

        return DEFAULT_CONFIG

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        if not (
            isinstance(action_space, gym.spaces.Box)
            and len(action_space.shape) == 1
            and not is_int_box(action_space)
            and np.all(np.isfinite(action_space.low))
            and np.all(np.isfinite(action_space.high))
        ):
            raise UnsupportedSpaceException(
                "Dreamer needs a 1-D float Box action space with finite bounds (its actor's "
                "actions "
                f"are tanh-squashed into them); action space {action_space} is not supported."
            )
        if not (config.get("model") or {}).get("custom_preprocessor"):
            image_layout(observation_space)  # refuses non-image spaces, naming the env's
        # The terms of the last loss (RLlib's `policy.stats_dict`).
        self.stats_dict: dict[str, Any] = {}
        super().__init__(observation_space, action_space, config)

    def make_model(self, num_outputs: int) -> DreamerModel:  # type: ignore[override]
        obs_space = (
            self.observation_space if self.raw_obs_model else self.preprocessor.observation_space
        )
        return build_dreamer_model(self, obs_space, self.action_space, self.config)

    def make_optimizer(self) -> dict[str, torch.optim.Optimizer]:  # type: ignore[override]
        """The world model's, the actor's and the critic's Adams (`dreamer_optimizer_fn`)."""
        return dict(zip(("model", "actor", "critic"), dreamer_optimizer_fn(self, self.config)))

    @property
    def dreamer_model(self) -> DreamerModel:
        """`self.model`, typed."""
        return cast(DreamerModel, self.model)

    # -- acting -------------------------------------------------------------

    def compute_actions_from_obs(
        self,
        obs: np.ndarray,
        explore: bool | None = None,
        state: list[np.ndarray] | None = None,
        prev_actions: np.ndarray | None = None,
        prev_rewards: np.ndarray | None = None,
        view_inputs: dict[str, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """`action_sampler_fn` on a batch of observations from `state` (the initial state
        when None; the previous action is part of it, so `prev_actions` and `prev_rewards`
        are not read). Returns the actions and `{action_logp, state_out_<i>}`.

        Raises:
            ValueError: `view_inputs` were given (Dreamer acts on observations only).
        """
        if view_inputs:
            raise ValueError(
                f"Dreamer acts on observations only; acting-time view columns "
                f"{sorted(view_inputs)} are not supported for it."
            )
        if explore is None:
            explore = bool(self.config.get("explore", True))
        with torch.inference_mode():
            state_t = None if state is None else [torch.as_tensor(s) for s in state]
            actions, logp, state_out = action_sampler_fn(
                self,
                self.dreamer_model,
                {SampleBatch.OBS: torch.as_tensor(obs)},
                state_t,
                explore,
                self.global_timestep,
            )
        extra = {SampleBatch.ACTION_LOGP: logp.numpy()}
        for i, s in enumerate(state_out):
            extra[f"state_out_{i}"] = s.numpy()
        return actions.numpy(), extra

    def to_env_actions(self, actions: np.ndarray, unsquash: bool, clip: bool) -> np.ndarray:
        """The actions live in [-1, 1] (tanh): always stretched onto the env's bounds."""
        return super().to_env_actions(actions, True, clip)

    # -- learning -----------------------------------------------------------

    def learn_step(self, batch: TensorDict, optimizers: dict[str, torch.optim.Optimizer]) -> dict:
        """One Dreamer update on a batch of chunks (see the module docstring)."""
        model_loss, actor_loss, critic_loss = dreamer_loss(
            self, self.dreamer_model, self.dist_class, batch
        )
        stats = {k: v for k, v in self.stats_dict.items() if k != LOG_GIF}
        clip_and_step(
            model_loss + actor_loss + critic_loss, optimizers, stats, self.config.get("grad_clip")
        )
        self.stats_dict = {k: v.detach() for k, v in self.stats_dict.items()}
        return {k: v for k, v in self.stats_dict.items() if k != LOG_GIF}

    def learn_on_batch(self, postprocessed_batch: SampleBatch) -> dict:
        """`TorchPolicy.learn_on_batch`; a batch with a "log_gif" column also gets the
        video summary its loss made (`log_summary`, as a numpy array) in the learner
        stats, where RLlib 1.13's `dreamer_stats` returned it (the learners report
        scalars only)."""
        info = super().learn_on_batch(postprocessed_batch)
        if LOG_GIF in postprocessed_batch and LOG_GIF in self.stats_dict:
            info[LEARNER_STATS_KEY][LOG_GIF] = convert_to_numpy(self.stats_dict[LOG_GIF])
        return info

    def extra_grad_info(self, train_batch: TensorDict) -> dict[str, Any]:
        return dreamer_stats(self, train_batch)

    def export_model(self, export_dir: str, onnx: int | None = None) -> None:
        """Not built: Dreamer's policy is the RSSM's posterior update and the actor, a
        stateful step on frames, not one network from observations to actions."""
        raise NotImplementedError(
            "Dreamer's policy model cannot be exported (its acting step is the RSSM's "
            "posterior update plus the actor); use export_policy_checkpoint for its weights."
        )


__all__ = [
    "DreamerTorchPolicy",
    "action_sampler_fn",
    "build_dreamer_model",
    "compute_dreamer_loss",
    "dreamer_loss",
    "dreamer_optimizer_fn",
    "dreamer_stats",
    "lambda_return",
    "log_summary",
    "preprocess_episode",
]
