"""The Learner's view of a policy: what `Learner` calls and reads, and nothing more.

A policy is trained by a `Learner` in one of two ways:

- `LossPolicy`: the learner runs loss -> backward -> finite check -> `grad_clip` ->
  `optimizer.step()` per minibatch (`TorchPolicy` and every algorithm built on it
  through `loss`).
- `LearnStepPolicy`: `make_optimizer` returns a dict of optimisers and `learn_step`
  orders its own updates (SAC, DDPG/TD3).

Both share `TrainablePolicy`. A policy may also define, and the learner then uses:

- `train_columns` (tuple of column names): the only columns turned into tensors, when
  declared by the class that defines `loss` (see `corral.policy.policy.declared_for`);
- `is_recurrent()` and `get_initial_state()`: recurrent policies get padded sequences
  (`max_seq_len` from `config["model"]`), with `seq_lens`, `state_in_<i>`, `seq_mask`;
- `trains_on_sequence_rows` (bool): each train-batch row is already a whole sequence
  (`[B, T, ...]` columns, Dreamer's): the rows are trained on as they are, even for a
  recurrent policy;
- `cur_lr` (`LearningRateSchedule`): the optimiser's rate before each update;
- `extra_grad_info(batch)`: stats of a loss that returns a bare tensor (RLlib's
  `stats_fn`).

These optional members are looked up with `getattr`, so the protocols do not list them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np
import torch

from corral.core.learner.finite import Optimizers

TensorDict = dict[str, torch.Tensor]


class TrainablePolicy(Protocol):
    """What the learner needs of every policy it trains."""

    @property
    def config(self) -> dict:
        """The policy's config; the learner reads `grad_clip` and, for recurrent
        policies, `model.max_seq_len`."""
        ...

    def make_optimizer(self) -> Optimizers:
        """A new optimiser (or dict of them) over the policy's parameters."""
        ...

    def after_update(self, stats: dict[str, Any]) -> Mapping[str, Any]:
        """Runs after each update with its mean stats; returns stats to log."""
        ...

    def bump_weights_seq(self) -> None:
        """Records that the weights changed (the worker set then sends them)."""
        ...


class LossPolicy(TrainablePolicy, Protocol):
    """A policy the learner steps itself, from the loss it returns."""

    @property
    def model(self) -> torch.nn.Module:
        """The module the loss is computed with."""
        ...

    @property
    def dist_class(self) -> type:
        """Its action distribution class (passed to `loss`)."""
        ...

    def loss(self, model: torch.nn.Module, dist_class: type, train_batch: TensorDict) -> Any:
        """`(loss, stats)`, or RLlib 1.x's bare loss tensor (or list of them, summed)."""
        ...


class RecurrentPolicy(TrainablePolicy, Protocol):
    """A policy whose `is_recurrent()` is True: trained on padded sequences."""

    def is_recurrent(self) -> bool:
        """True: train on sequences."""
        ...

    def get_initial_state(self) -> list[np.ndarray]:
        """One array per state tensor (without a batch dimension)."""
        ...


class LearnStepPolicy(TrainablePolicy, Protocol):
    """A policy that orders its own updates with its own optimisers."""

    def learn_step(self, batch: TensorDict, optimizers: Any) -> dict[str, Any]:
        """One minibatch: backward and step each optimiser as the algorithm needs
        (calling `check_finite_update` before each step); returns the stats."""
        ...
