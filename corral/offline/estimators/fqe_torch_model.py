"""Fitted Q evaluation (FQE, Le et al. 2019): Q^pi of a fixed policy, fitted from logged data.

Each iteration k freezes the current network Q_k and regresses a fresh target on it:

    y = r + gamma * (1 - terminated) * E_{a' ~ pi(.|s')} Q_k(s', a'),

then fits Q_{k+1}(s, a) to y by minibatch SGD on the mean squared error. The expectation
over pi is exact for Discrete actions (pi's probability of every action) and a mean over
`num_action_samples` sampled actions for Box actions. The direct-method and doubly robust
estimators (`corral.offline.estimators.direct_method`) read Q and V^pi off this model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.offline.estimators.off_policy_estimator import action_probs_all
from corral.policy.sample_batch import SampleBatch
from corral.utils.torch_utils import make_adam, step_optimizer


def _mlp(sizes: Sequence[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class FQETorchModel:
    """Q^pi(s, a) of `policy`, fitted by fitted Q evaluation on the rows it is trained on.

    Args:
        policy: the evaluated (target) policy; its action space decides the network's shape.
        gamma: the discount.
        hiddens: sizes of the hidden layers (ReLU).
        lr: Adam's learning rate.
        n_iters: FQE iterations (target refreshes) per `train` call.
        minibatch_size: rows per SGD step.
        sgd_steps_per_iter: SGD steps between two target refreshes (None: one pass over
            the rows held).
        max_rows: rows kept from earlier `train` calls (the newest), so that later calls
            keep fitting on all recent data, not only on their own batch.
        num_action_samples: actions sampled from pi per next state for Box action spaces.
        seed: seeds the network's initialisation and the minibatch order.
    """

    def __init__(
        self,
        policy: Any,
        gamma: float,
        hiddens: Sequence[int] = (64, 64),
        lr: float = 1e-3,
        n_iters: int = 20,
        minibatch_size: int = 256,
        sgd_steps_per_iter: int | None = None,
        max_rows: int = 100_000,
        num_action_samples: int = 8,
        seed: int | None = 0,
    ) -> None:
        if n_iters < 1 or minibatch_size < 1 or max_rows < 1:
            raise ValueError(
                "FQETorchModel needs n_iters, minibatch_size and max_rows >= 1, got "
                f"{n_iters}, {minibatch_size}, {max_rows}"
            )
        self.policy = policy
        self.gamma = float(gamma)
        self.action_space = policy.action_space
        self.discrete = isinstance(self.action_space, gym.spaces.Discrete)
        if not self.discrete and not isinstance(self.action_space, gym.spaces.Box):
            raise TypeError(f"FQE supports Discrete and Box action spaces, got {self.action_space}")
        self.n_iters = int(n_iters)
        self.minibatch_size = int(minibatch_size)
        self.sgd_steps_per_iter = sgd_steps_per_iter
        self.max_rows = int(max_rows)
        self.num_action_samples = int(num_action_samples)
        self.hiddens = tuple(int(h) for h in hiddens)
        self.lr = float(lr)
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.q: nn.Sequential | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self._rows: dict[str, np.ndarray] | None = None

    # -- network ------------------------------------------------------------

    def _action_dim(self) -> int:
        return int(np.prod(self.action_space.shape))

    def _build(self, obs_dim: int) -> None:
        with torch.random.fork_rng(devices=[]):
            if self.seed is not None:
                torch.manual_seed(self.seed)
            if self.discrete:
                self.q = _mlp([obs_dim, *self.hiddens, int(self.action_space.n)])
            else:
                self.q = _mlp([obs_dim + self._action_dim(), *self.hiddens, 1])
        self.optimizer = make_adam(self.q.parameters(), lr=self.lr)

    def _q_values(self, net: nn.Module, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        if self.discrete:
            return net(obs).gather(1, actions.long().view(-1, 1)).squeeze(1)
        return net(torch.cat([obs, actions.view(len(obs), -1).float()], 1)).squeeze(1)

    # -- the target policy's actions ----------------------------------------

    def _policy_weights(self, obs: np.ndarray) -> np.ndarray:
        """Discrete: pi(a|s) for every a, [N, n]."""
        return action_probs_all(self.policy, obs, self.action_space)

    def _policy_samples(self, obs: np.ndarray) -> np.ndarray:
        """Box: `num_action_samples` actions per row from pi, [N, K, action_dim]."""
        sample = getattr(self.policy, "compute_actions_from_obs", None)
        draws = []
        for _ in range(self.num_action_samples):
            if sample is not None:
                actions, _ = sample(obs, explore=True)
            else:
                actions, _, _ = self.policy.compute_actions(obs, explore=True)
            draws.append(np.asarray(actions, np.float32).reshape(len(obs), -1))
        return np.stack(draws, axis=1)

    def _expected_q(self, net: nn.Module, obs: torch.Tensor, pi: torch.Tensor) -> torch.Tensor:
        """E_{a ~ pi(.|s)} Q(s, a) with `pi` from `_policy_weights` / `_policy_samples`."""
        if self.discrete:
            return (net(obs) * pi).sum(1)
        k = pi.shape[1]
        flat_obs = obs.repeat_interleave(k, 0)
        q = net(torch.cat([flat_obs, pi.reshape(len(obs) * k, -1)], 1)).view(len(obs), k)
        return q.mean(1)

    def _pi_of(self, obs: np.ndarray) -> np.ndarray:
        return self._policy_weights(obs) if self.discrete else self._policy_samples(obs)

    # -- fitting ------------------------------------------------------------

    def _add_rows(self, batch: SampleBatch) -> dict[str, np.ndarray]:
        n = batch.count
        obs = np.asarray(batch[SampleBatch.OBS], np.float32).reshape(n, -1)
        next_obs = np.asarray(batch[SampleBatch.NEXT_OBS], np.float32).reshape(n, -1)
        terminated = batch.get(SampleBatch.TERMINATEDS, batch.get(SampleBatch.DONES))
        new = {
            "obs": obs,
            "actions": np.asarray(batch[SampleBatch.ACTIONS]).reshape(n, -1)
            if not self.discrete
            else np.asarray(batch[SampleBatch.ACTIONS], np.int64).reshape(n),
            "rewards": np.asarray(batch[SampleBatch.REWARDS], np.float32),
            "terminated": np.asarray(terminated, np.float32),
            # The target policy is fixed during a `train` call: its action probabilities
            # (or samples) at the next states are computed once per row.
            "next_obs": next_obs,
        }
        if self._rows is not None:
            new = {k: np.concatenate([self._rows[k], v]) for k, v in new.items()}
        self._rows = {k: v[-self.max_rows :] for k, v in new.items()}
        return self._rows

    def train(self, batch: SampleBatch) -> dict[str, float]:
        """Adds `batch`'s rows to the rows held and runs `n_iters` FQE iterations on them.

        Returns `{"loss": the last iteration's mean squared error}`.
        """
        rows = self._add_rows(batch)
        if self.q is None:
            self._build(rows["obs"].shape[1])
        assert self.q is not None and self.optimizer is not None
        n = len(rows["rewards"])
        obs = torch.from_numpy(rows["obs"])
        actions = torch.from_numpy(np.asarray(rows["actions"]))
        rewards = torch.from_numpy(rows["rewards"])
        not_done = 1.0 - torch.from_numpy(rows["terminated"])
        next_obs = torch.from_numpy(rows["next_obs"])
        # pi at the next states, for the rows held now (the policy may have changed
        # since an earlier call: recomputed for all rows).
        next_pi = torch.from_numpy(np.asarray(self._pi_of(rows["next_obs"]), np.float32))
        steps = self.sgd_steps_per_iter or max(1, -(-n // self.minibatch_size))
        loss_value = float("nan")
        for _ in range(self.n_iters):
            with torch.no_grad():
                targets = rewards + self.gamma * not_done * self._expected_q(
                    self.q, next_obs, next_pi
                )
            losses = []
            for _ in range(steps):
                idx = torch.from_numpy(self.rng.integers(0, n, min(self.minibatch_size, n)))
                pred = self._q_values(self.q, obs[idx], actions[idx])
                loss = torch.mean((pred - targets[idx]) ** 2)
                self.optimizer.zero_grad()
                loss.backward()
                step_optimizer(self.optimizer)
                losses.append(loss.detach())
            loss_value = float(torch.stack(losses).mean())
        return {"loss": loss_value}

    # -- reading it ---------------------------------------------------------

    def estimate_q(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Q^pi(s, a) for rows of observations and the actions taken."""
        if self.q is None:
            raise RuntimeError("FQETorchModel.estimate_q before any train() call")
        n = len(obs)
        obs_t = torch.from_numpy(np.asarray(obs, np.float32).reshape(n, -1))
        act = np.asarray(actions, np.int64 if self.discrete else np.float32)
        with torch.no_grad():
            return self._q_values(self.q, obs_t, torch.from_numpy(act)).double().numpy()

    def estimate_v(self, obs: np.ndarray) -> np.ndarray:
        """V^pi(s) = E_{a ~ pi(.|s)} Q^pi(s, a)."""
        if self.q is None:
            raise RuntimeError("FQETorchModel.estimate_v before any train() call")
        n = len(obs)
        obs_np = np.asarray(obs, np.float32).reshape(n, -1)
        pi = torch.from_numpy(np.asarray(self._pi_of(obs_np), np.float32))
        with torch.no_grad():
            return self._expected_q(self.q, torch.from_numpy(obs_np), pi).double().numpy()
