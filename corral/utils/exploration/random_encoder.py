"""`RE3`: random encoders for efficient exploration.

Seo, Chen, Shin, Lee, Abbeel and Lee 2021, "State Entropy Maximization with
Random Encoders for Efficient Exploration" (ICML 2021, arXiv:2102.09430). A
randomly initialised, never trained encoder maps observations to embeddings
`y = f(s)`; the entropy of the visited states is estimated in that space with
the k-nearest-neighbour estimator, and each state's share of it,

    r_i(s) = log(||y - y^kNN|| + 1)      (eq. 3 of the paper)

(`y^kNN`: the k-th nearest other embedding in the batch), scaled by `beta_t`,
is added to the extrinsic reward: `r = r_e + beta_t * r_i`. `beta_t` stays at
`beta` ("constant") or decays as `beta * (1 - rho)^t` ("linear_decay", RLlib's
name; t = the training iteration).

As in RLlib 1.13 the work is split in two:

- the `RE3` exploration computes the embeddings in `postprocess_trajectory` and
  stores them in the batch's `"obs_embeds"` column; actions come from its
  `sub_exploration` (default: epsilon-greedy at epsilon 1 for `random_timesteps`
  steps, then 0.01, for Discrete actions; Ornstein-Uhlenbeck noise after
  `random_timesteps` uniform random steps for Box actions);
- `corral.agents.callbacks.RE3UpdateCallbacks` adds the rewards to each train
  batch in `on_learn_on_batch` (and to the advantages and value targets when the
  batch has them, as for PPO), with the distances normalised by their running
  standard deviation (`MovingMeanStd`), and follows the training iteration for
  the `beta` schedule.

The encoder is attached to the policy's model (`model._re3_encoder_net`), with
its weights frozen: it is part of the policy's weights, so every rollout worker
embeds with the same encoder after the first weight sync (the kNN distances of a
train batch then compare embeddings of one space) and checkpoints hold it.

Two places where corral follows the paper rather than RLlib 1.13's code:
`compute_states_entropy` returns the distance to the k-th nearest neighbour
(RLlib 1.13 returns that neighbour's index in the batch), and `MovingMeanStd`
updates its mean as the combined mean of the two batches (RLlib 1.13 adds
`delta + n / N` to it, which also skews its variance).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from corral.models.catalog import ModelCatalog
from corral.policy.sample_batch import SampleBatch
from corral.utils.exploration.exploration import DelegatingExploration
from corral.utils.schedules import PiecewiseSchedule
from corral.utils.spaces import is_int_box

# The column of the observations' embeddings.
OBS_EMBEDS = SampleBatch.OBS_EMBEDS
# The `beta_schedule` names.
BETA_SCHEDULES = ("constant", "linear_decay")


class MovingMeanStd:
    """The running mean, variance and count of a stream of batches (Chan et al.'s
    parallel update).

    Args:
        epsilon: the initial count (a prior of one sample at mean 0, variance 1).
        shape: the shape of one sample ([] or None: scalars).
    """

    def __init__(self, epsilon: float = 1e-4, shape: list[int] | None = None) -> None:
        shape = list(shape or [])
        self.mean = np.zeros(shape, dtype=np.float32)
        self.var = np.ones(shape, dtype=np.float32)
        self.count = float(epsilon)

    def __call__(self, inputs: np.ndarray) -> np.ndarray:
        """Updates the statistics with `inputs` (samples along axis 0), then returns
        `log(inputs / std + 1)`, the inputs scaled by the running std, log-compressed."""
        inputs = np.asarray(inputs, dtype=np.float64)
        self.update_params(np.mean(inputs, axis=0), np.var(inputs, axis=0), inputs.shape[0])
        return np.log(inputs / self.std + 1.0)

    def update_params(
        self, batch_mean: float | np.ndarray, batch_var: float | np.ndarray, batch_count: float
    ) -> None:
        """Merges a batch's mean, (population) variance and count into the totals."""
        delta = batch_mean - self.mean
        total = self.count + batch_count
        self.mean = (self.mean + delta * batch_count / total).astype(np.float32)
        m2 = self.var * self.count + batch_var * batch_count
        m2 = m2 + np.square(delta) * self.count * batch_count / total
        self.var = (m2 / total).astype(np.float32)
        self.count = float(total)

    @property
    def std(self) -> np.ndarray:
        """The running standard deviation."""
        return np.sqrt(self.var)


def update_beta(beta_schedule: str, beta: float, rho: float, step: int) -> float:
    """The intrinsic reward's weight at training iteration `step`.

    Args:
        beta_schedule: "constant" (`beta`) or "linear_decay" (`beta * (1 - rho)^step`).
        beta: the initial weight.
        rho: the decay rate per iteration.
        step: the training iteration.

    Raises:
        ValueError: an unknown `beta_schedule`.
    """
    if beta_schedule == "linear_decay":
        return beta * (1.0 - rho) ** step
    if beta_schedule == "constant":
        return beta
    raise ValueError(f"beta_schedule={beta_schedule!r}: expected one of {list(BETA_SCHEDULES)}.")


def compute_states_entropy(obs_embeds: np.ndarray, embed_dim: int, k_nn: int) -> np.ndarray:
    """Each embedding's distance to its `k_nn`-th nearest other embedding in the batch
    (the k-NN state-entropy estimate's per-state term, before the log).

    Args:
        obs_embeds: embeddings, `[..., embed_dim]` (flattened to rows).
        embed_dim: the embedding size.
        k_nn: which neighbour (1: the nearest other row); at most the number of
            other rows is used.

    Returns:
        float32 distances, one per row (zeros for a batch of one row).
    """
    if int(k_nn) < 1:
        raise ValueError(f"k_nn={k_nn!r}: expected an int >= 1.")
    y = np.reshape(np.asarray(obs_embeds, dtype=np.float64), (-1, int(embed_dim)))
    n = y.shape[0]
    if n < 2:
        return np.zeros(n, np.float32)
    # Squared distances from the Gram matrix: [n, n] memory, not [n, n, embed_dim].
    sq = np.sum(y * y, axis=1)
    dist2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (y @ y.T), 0.0)
    # Column 0 of the sorted distances is the row itself (distance 0).
    k = min(int(k_nn), n - 1)
    kth = np.partition(dist2, k, axis=1)[:, k]
    return np.sqrt(kth).astype(np.float32)


class RE3(DelegatingExploration):
    """Embeds the observations with a fixed random encoder for the state-entropy
    rewards of `RE3UpdateCallbacks` (see the module doc).

    Args:
        action_space: the policy's action space.
        embeds_dim: the embedding size.
        encoder_net_config: the model config of the encoder (a `ModelCatalog` model
            over the policy's observation space; None: a copy of the policy's
            `model` config).
        beta: the intrinsic reward's initial weight (`RE3UpdateCallbacks` applies it).
        beta_schedule: "constant" or "linear_decay".
        rho: the decay rate of "linear_decay", in [0, 1].
        k_nn: which nearest neighbour the entropy estimate uses.
        random_timesteps: uniform random timesteps of the default sub-exploration.
        sub_exploration: the `exploration_config` of the exploration that picks the
            actions (None: see the module doc).
        **kwargs: `framework`, `policy_config`, `model`, `num_workers`,
            `worker_index` (see `Exploration`).

    Raises:
        ValueError: a bad argument (named), no model, or an action space without
            a default sub-exploration.
    """

    def __init__(
        self,
        action_space: gym.Space,
        *,
        embeds_dim: int = 128,
        encoder_net_config: dict | None = None,
        beta: float = 0.2,
        beta_schedule: str = "constant",
        rho: float = 0.1,
        k_nn: int = 50,
        random_timesteps: int = 10000,
        sub_exploration: dict | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(action_space, **kwargs)
        if self.model is None:
            raise ValueError(
                "RE3 attaches its encoder to the policy's model, but no model was given "
                "(model=None)."
            )
        check_re3_args(embeds_dim=embeds_dim, k_nn=k_nn, beta=beta, rho=rho)
        if beta_schedule not in BETA_SCHEDULES:
            raise ValueError(
                f"RE3 beta_schedule={beta_schedule!r}: expected one of {list(BETA_SCHEDULES)}."
            )
        self.embeds_dim = int(embeds_dim)
        self.beta = float(beta)
        self.beta_schedule = beta_schedule
        self.rho = float(rho)
        self.k_nn = int(k_nn)
        self.random_timesteps = int(random_timesteps)
        self.encoder_net_config = dict(
            encoder_net_config
            if encoder_net_config is not None
            else self.policy_config.get("model") or {}
        )
        encoder = ModelCatalog.get_model_v2(
            self.model.obs_space,
            action_space,
            self.embeds_dim,
            self.encoder_net_config,
            framework="torch",
            name="encoder_net",
        )
        encoder.requires_grad_(False)
        # A submodule of the policy's model: synced to the workers and checkpointed.
        self.model._re3_encoder_net = encoder
        self._encoder_net = encoder
        self.sub_exploration = sub_exploration or self._default_sub_exploration()

        self.exploration_submodule = self.make_submodule(self.sub_exploration)

    def _default_sub_exploration(self) -> dict:
        warmup = self.random_timesteps
        if isinstance(self.action_space, gym.spaces.Discrete):
            # A step function: uniform random actions, then nearly greedy (the paper's).
            schedule = PiecewiseSchedule(
                [(0, 1.0), (warmup + 1, 1.0), (warmup + 2, 0.01)], outside_value=0.01
            )
            return {"type": "EpsilonGreedy", "epsilon_schedule": schedule}
        if isinstance(self.action_space, gym.spaces.Box) and not is_int_box(self.action_space):
            return {"type": "OrnsteinUhlenbeckNoise", "random_timesteps": warmup}
        raise ValueError(
            f"RE3 has no default sub_exploration for action space {self.action_space}; "
            "pass sub_exploration={'type': ...}."
        )

    # -- the Exploration hooks ------------------------------------------------

    def postprocess_trajectory(self, policy: Any, sample_batch: Any, **kwargs: Any) -> Any:
        """Stores the observations' embeddings in the `"obs_embeds"` column."""
        device = getattr(policy, "device", None) or torch.device("cpu")
        obs = torch.as_tensor(sample_batch[SampleBatch.OBS], device=device)
        if not obs.is_floating_point() and not getattr(
            self._encoder_net, "accepts_integer_obs", False
        ):
            obs = obs.float()
        with torch.no_grad():
            embeds, _ = self._encoder_net({SampleBatch.OBS: obs})
        sample_batch[OBS_EMBEDS] = embeds.detach().cpu().numpy().astype(np.float32, copy=False)
        return sample_batch


def check_re3_args(*, embeds_dim: int, k_nn: int, beta: float, rho: float) -> None:
    """Raises `ValueError` naming the first bad RE3 argument."""
    if int(embeds_dim) < 1:
        raise ValueError(f"RE3 embeds_dim={embeds_dim!r}: expected an int >= 1.")
    if int(k_nn) < 1:
        raise ValueError(f"RE3 k_nn={k_nn!r}: expected an int >= 1.")
    if float(beta) < 0:
        raise ValueError(f"RE3 beta={beta!r}: expected >= 0.")
    if not 0.0 <= float(rho) <= 1.0:
        raise ValueError(f"RE3 rho={rho!r}: expected a decay rate in [0, 1].")


__all__ = [
    "OBS_EMBEDS",
    "RE3",
    "MovingMeanStd",
    "compute_states_entropy",
    "update_beta",
]
