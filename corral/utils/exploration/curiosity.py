"""`Curiosity`: the intrinsic curiosity module (ICM) as an exploration.

Pathak, Agrawal, Efros and Darrell 2017, "Curiosity-driven Exploration by
Self-supervised Prediction" (ICML 2017, arXiv:1705.05363). Three networks learn
a small model of the environment:

- the feature net embeds an observation, `phi = f(s)`;
- the inverse net predicts the action taken from `(phi, phi')` (eq. 2); its
  loss, the action's negative log-likelihood, shapes the features to hold
  what the agent can influence;
- the forward net predicts `phi'` from `(phi, a)` (eq. 4); its loss
  `L_F = 1/2 ||f(phi, a) - phi'||^2` is large for transitions the model has not
  learnt yet.

The intrinsic reward is `r_i = eta * L_F` per transition (eq. 6), added to the
extrinsic reward. All three nets are trained together, by their own Adam
optimizer, on `(1 - beta) * L_I + beta * L_F` (eq. 7).

As in RLlib 1.13 this happens in `postprocess_trajectory`, on each sampled
trajectory (a whole fragment for policies that postprocess batched, like PPO)
before the policy's own postprocessing (GAE, n-step) sees the rewards: the
intrinsic reward of a transition is computed with the nets as they are, then the
nets take one optimizer step on that trajectory. Actions come from the
`sub_exploration` (e.g. `StochasticSampling` for PPO).

The three nets are attached to the policy's model (`model._curiosity_feature_net`,
`model._curiosity_inverse_fcnet`, `model._curiosity_forward_fcnet`, RLlib's
names): their weights are part of the policy's weights, so checkpoints
(safetensors) hold and restore them. The policy's own optimizer never moves
them (the policy loss gives them no gradient; the ICM optimizer clears its
gradients after each step). The ICM optimizer's moments are not checkpointed
(neither are they in RLlib): after a restore they start afresh.

Where the ICM trains: it learns in the worker that samples, so the one that
trains must be the one whose weights count. RLlib 1.13 therefore requires
`num_workers: 0` (the local worker samples and learns); corral does too, and
also refuses `num_gpus > 0` and `num_learners > 0`, where the learner trains a
copy of the policy whose (untrained) ICM weights would overwrite the sampling
policy's after each update.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.models.catalog import ModelCatalog
from corral.models.torch.misc import SlimFC
from corral.policy.sample_batch import SampleBatch
from corral.utils.exploration.exploration import DelegatingExploration
from corral.utils.torch_utils import one_hot

# RLlib 1.13's module-level alias (part of its public surface).
F = nn.functional


class Curiosity(DelegatingExploration):
    """Intrinsic rewards from the forward-model error of an ICM (see the module doc).

    Args:
        action_space: a Discrete or MultiDiscrete action space.
        feature_dim: the size of the feature vectors `phi`.
        feature_net_config: the model config of the feature net (a
            `ModelCatalog` model over the policy's observation space; None: a
            copy of the policy's `model` config).
        inverse_net_hiddens: hidden layer sizes of the inverse net.
        inverse_net_activation: the inverse net's activation ("relu", "tanh", ...).
        forward_net_hiddens: hidden layer sizes of the forward net.
        forward_net_activation: the forward net's activation.
        beta: the forward loss' weight in the ICM loss (the inverse loss gets
            `1 - beta`), in [0, 1].
        eta: the intrinsic reward's scale (`r_i = eta * L_F`), >= 0.
        lr: the learning rate of the ICM's Adam optimizer.
        sub_exploration: the `exploration_config` of the exploration that picks
            the actions (e.g. `{"type": "StochasticSampling"}`); required.
        **kwargs: `framework`, `policy_config`, `model`, `num_workers`,
            `worker_index` (see `Exploration`).

    Raises:
        ValueError: a bad argument (named), no model, no `sub_exploration`, or a
            setup where the sampling policy is not the one that learns
            (`num_workers`, `num_gpus`, `num_learners` > 0).
    """

    def __init__(
        self,
        action_space: gym.Space,
        *,
        feature_dim: int = 288,
        feature_net_config: dict | None = None,
        inverse_net_hiddens: Sequence[int] = (256,),
        inverse_net_activation: str = "relu",
        forward_net_hiddens: Sequence[int] = (256,),
        forward_net_activation: str = "relu",
        beta: float = 0.2,
        eta: float = 1.0,
        lr: float = 1e-3,
        sub_exploration: dict | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(action_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
            raise ValueError(
                f"Curiosity needs a Discrete or MultiDiscrete action space (its inverse net "
                f"predicts the action), got {action_space}."
            )
        super().__init__(action_space, **kwargs)
        self._check_setup(sub_exploration)
        if int(feature_dim) < 1:
            raise ValueError(f"Curiosity feature_dim={feature_dim!r}: expected an int >= 1.")
        if not 0.0 <= float(beta) <= 1.0:
            raise ValueError(f"Curiosity beta={beta!r}: expected a weight in [0, 1].")
        if float(eta) < 0:
            raise ValueError(f"Curiosity eta={eta!r}: expected >= 0.")
        if float(lr) <= 0:
            raise ValueError(f"Curiosity lr={lr!r}: expected > 0.")
        assert self.model is not None  # (checked by _check_setup)
        self.feature_dim = int(feature_dim)
        self.feature_net_config = dict(
            feature_net_config
            if feature_net_config is not None
            else self.policy_config.get("model") or {}
        )
        self.inverse_net_hiddens = [int(h) for h in inverse_net_hiddens]
        self.inverse_net_activation = inverse_net_activation
        self.forward_net_hiddens = [int(h) for h in forward_net_hiddens]
        self.forward_net_activation = forward_net_activation
        self.beta = float(beta)
        self.eta = float(eta)
        self.lr = float(lr)
        self.sub_exploration = sub_exploration
        if isinstance(action_space, gym.spaces.Discrete):
            self.action_dim = int(action_space.n)
        else:
            self.action_dim = int(np.sum(action_space.nvec))

        feature_net = ModelCatalog.get_model_v2(
            self.model.obs_space,
            action_space,
            self.feature_dim,
            self.feature_net_config,
            framework="torch",
            name="feature_net",
        )
        inverse_net = _create_fc_net(
            [2 * self.feature_dim, *self.inverse_net_hiddens, self.action_dim],
            self.inverse_net_activation,
        )
        forward_net = _create_fc_net(
            [self.feature_dim + self.action_dim, *self.forward_net_hiddens, self.feature_dim],
            self.forward_net_activation,
        )
        # Submodules of the policy's model: their weights are the policy's (checkpoints).
        self.model._curiosity_feature_net = feature_net
        self.model._curiosity_inverse_fcnet = inverse_net
        self.model._curiosity_forward_fcnet = forward_net
        self._feature_net, self._inverse_net, self._forward_net = (
            feature_net,
            inverse_net,
            forward_net,
        )
        self._optimizer = torch.optim.Adam(
            [
                *forward_net.parameters(),
                *inverse_net.parameters(),
                *feature_net.parameters(),
            ],
            lr=self.lr,
        )
        # The losses of the last update (reported by `get_info`).
        self._last_losses: dict[str, float] = {}

        self.exploration_submodule = self.make_submodule(sub_exploration)

    def _check_setup(self, sub_exploration: dict | None) -> None:
        if self.model is None:
            raise ValueError(
                "Curiosity attaches its nets to the policy's model, but no model was given "
                "(model=None)."
            )
        if sub_exploration is None:
            raise ValueError(
                "Curiosity needs a sub_exploration, the exploration that picks the actions "
                "(e.g. sub_exploration={'type': 'StochasticSampling'} for PPO)."
            )
        if self.num_workers != 0:
            raise ValueError(
                f"Curiosity exploration trains its nets where the samples are taken, so it "
                f"needs the local worker to sample: num_workers must be 0 (got "
                f"{self.num_workers}), as in RLlib 1.13."
            )
        config = self.policy_config
        for key in ("num_gpus", "num_learners"):
            if (config.get(key) or 0) > 0:
                raise ValueError(
                    f"Curiosity exploration with {key}={config[key]!r}: the learner would "
                    f"train a copy of the policy whose curiosity nets overwrite the sampling "
                    f"policy's after each update; set {key}=0."
                )

    # -- the Exploration hooks ------------------------------------------------

    def postprocess_trajectory(self, policy: Any, sample_batch: Any, **kwargs: Any) -> Any:
        """Adds `eta * L_F` to each transition's reward and takes one ICM optimizer
        step per trajectory (see the module doc).

        A fragment of several trajectories (a policy that postprocesses batched,
        like PPO) is taken one trajectory (a run of rows of one episode) after the
        other, as RLlib 1.13 sees them: each trajectory's rewards come from the nets
        as the previous trajectories' steps left them.
        """
        if sample_batch.count == 0:
            return sample_batch
        device = getattr(policy, "device", None) or torch.device("cpu")
        obs = torch.as_tensor(sample_batch[SampleBatch.OBS], device=device)
        next_obs = torch.as_tensor(sample_batch[SampleBatch.NEXT_OBS], device=device)
        actions = torch.as_tensor(sample_batch[SampleBatch.ACTIONS], device=device)
        intrinsic = np.zeros(sample_batch.count, np.float32)
        losses = np.zeros(3)
        # The samplers may run under `torch.inference_mode()`; the ICM needs gradients.
        with torch.inference_mode(False), torch.enable_grad():
            for start, end in _trajectory_bounds(sample_batch):
                rows = slice(start, end)
                forward_l2, forward_loss, inverse_loss = self._icm_losses(
                    torch.cat([obs[rows], next_obs[rows]]), actions[rows]
                )
                intrinsic[rows] = self.eta * forward_l2.detach().cpu().numpy()
                loss = (1.0 - self.beta) * inverse_loss + self.beta * forward_loss
                self._optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self._optimizer.step()
                losses += (end - start) * np.array(
                    [float(forward_loss.detach()), float(inverse_loss.detach()), 0.0]
                )
            # No stale gradients left on the model for the policy's optimizer.
            self._optimizer.zero_grad(set_to_none=True)
        rewards = sample_batch[SampleBatch.REWARDS]
        sample_batch[SampleBatch.REWARDS] = (rewards + intrinsic).astype(rewards.dtype, copy=False)
        self._last_losses = {
            "curiosity_forward_loss": float(losses[0] / sample_batch.count),
            "curiosity_inverse_loss": float(losses[1] / sample_batch.count),
            "curiosity_intrinsic_reward_mean": float(np.mean(intrinsic)),
        }
        return sample_batch

    def _icm_losses(
        self, obs_and_next: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-row `L_F` and the mean forward and inverse losses of a batch whose first
        half of `obs_and_next` are the observations and second half the next ones."""
        feature_net = self._feature_net
        if not obs_and_next.is_floating_point() and not getattr(
            feature_net, "accepts_integer_obs", False
        ):
            obs_and_next = obs_and_next.float()
        phis, _ = feature_net({SampleBatch.OBS: obs_and_next})
        phi, next_phi = torch.chunk(phis, 2)
        space = self.action_space
        if isinstance(space, gym.spaces.Discrete):
            actions = actions.long() - int(space.start)
        else:
            actions = actions.long().reshape(actions.shape[0], -1)
        # Forward model (eq. 4-5): predicted phi' from phi and the one-hot action.
        predicted_next_phi = self._forward_net(
            torch.cat([phi, one_hot(actions, space).float()], dim=-1)
        )
        forward_l2 = 0.5 * torch.sum((predicted_next_phi - next_phi) ** 2, dim=-1)
        # Inverse model (eq. 2-3): the taken action's negative log-likelihood.
        logits = self._inverse_net(torch.cat([phi, next_phi], dim=-1))
        if isinstance(space, gym.spaces.Discrete):
            inverse_nll = F.cross_entropy(logits, actions, reduction="none")
        else:
            parts = torch.split(logits, [int(n) for n in np.asarray(space.nvec).reshape(-1)], -1)
            inverse_nll = sum(
                F.cross_entropy(part, actions[:, i], reduction="none")
                for i, part in enumerate(parts)
            )
        return forward_l2, forward_l2.mean(), torch.as_tensor(inverse_nll).mean()

    # -- reporting and state --------------------------------------------------

    def get_info(self, sess: Any = None) -> dict[str, Any]:
        return {**self._last_losses, **super().get_info()}


def _trajectory_bounds(sample_batch: Any) -> list[tuple[int, int]]:
    """(start, end) of each run of rows of one episode (the whole batch when it has no
    episode ids)."""
    n = sample_batch.count
    eps_id = sample_batch.get(SampleBatch.EPS_ID)
    if eps_id is None or len(eps_id) != n:
        return [(0, n)]
    cuts = [0, *(np.flatnonzero(np.asarray(eps_id)[1:] != np.asarray(eps_id)[:-1]) + 1), n]
    return [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


def _create_fc_net(layer_dims: Sequence[int], activation: str) -> nn.Sequential:
    """A fully connected net through `layer_dims` (the input size first), with
    `activation` after every layer but the last, Xavier-uniform weights (RLlib's)."""
    if any(int(d) < 1 for d in layer_dims):
        raise ValueError(f"Curiosity net layer sizes {list(layer_dims)}: expected ints >= 1.")
    last = len(layer_dims) - 2
    return nn.Sequential(
        *(
            SlimFC(
                int(layer_dims[i]),
                int(layer_dims[i + 1]),
                initializer=nn.init.xavier_uniform_,
                activation_fn=activation if i < last else None,
            )
            for i in range(len(layer_dims) - 1)
        )
    )


__all__ = ["Curiosity", "F"]
