"""`Exploration`: how a policy turns its action distribution into actions.

An exploration object is built per policy by `make_exploration` from the
`exploration_config` dict ("type" plus constructor arguments). The policy
calls `get_exploration_action` on every batched forward pass with the
distribution built from the model output (for Q-learning, the Q-values are
the distribution inputs) and the global timestep (env steps sampled so far),
which drives the annealing schedules.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch

from corral.utils.config_spec import Spec
from corral.utils.spaces import is_int_box


class Exploration:
    """Base class; subclasses implement `get_exploration_action`.

    Args:
        action_space: the policy's action space.
        framework: only "torch".
        policy_config: the policy's config dict.
        model: the policy's model.
        num_workers: number of remote rollout workers of the trainer.
        worker_index: this worker's index (0 = the driver's local worker).
    """

    # What each constructor argument that an `exploration_config` sets may be, declared by
    # each class for its own arguments (`config_specs()` gathers a class's and its bases').
    # `make_exploration` checks them when the policy is built, naming
    # `exploration_config.<key>`; a user's class without a table is not checked.
    CONFIG_SPECS: ClassVar[dict[str, Spec]] = {}

    @classmethod
    def config_specs(cls) -> dict[str, Spec]:
        """The specs of this class's `exploration_config` keys (its own and its bases')."""
        specs: dict[str, Spec] = {}
        for klass in reversed(cls.__mro__):
            specs.update(vars(klass).get("CONFIG_SPECS", {}))
        return specs

    def __init__(
        self,
        action_space: gym.Space,
        *,
        framework: str = "torch",
        policy_config: dict | None = None,
        model: torch.nn.Module | None = None,
        num_workers: int = 0,
        worker_index: int = 0,
    ) -> None:
        if framework != "torch":
            raise ValueError(f"Exploration framework {framework!r}: only 'torch' is built.")
        self.action_space = action_space
        self.policy_config = policy_config or {}
        self.model = model
        self.num_workers = num_workers
        self.worker_index = worker_index
        # The timestep of the last explored action (for schedules and checkpoints).
        self.last_timestep = 0

    def get_exploration_action(
        self, action_distribution: Any, timestep: int | None = None, explore: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (actions, their log-likelihood) for a batch, as torch tensors.

        Args:
            action_distribution: a `TorchDistributionWrapper` over the model output.
            timestep: the global timestep (None: the last one seen).
            explore: False gives the exploitation (deterministic) action.
        """
        raise NotImplementedError

    def _timestep(self, timestep: int | None) -> int:
        if timestep is not None:
            self.last_timestep = int(timestep)
        return self.last_timestep

    def before_compute_actions(
        self, *, timestep: int | None = None, explore: bool | None = None, **kwargs: Any
    ) -> None:
        """Hook before each batched forward pass that computes actions (RLlib 1.13's
        name; e.g. `ParameterNoise` perturbs the weights here). A policy calls it only
        when a subclass overrides it."""

    def postprocess_trajectory(self, policy: Any, sample_batch: Any, **kwargs: Any) -> Any:
        """Hook on each sampled trajectory before the policy postprocesses it (RLlib
        1.13's; e.g. `ParameterNoise` adapts its noise scale here); returns the batch.
        The samplers call it only when a subclass overrides it."""
        return sample_batch

    def on_episode_start(self, policy: Any = None, **kwargs: Any) -> None:
        """Hook at the start of each episode (e.g. to reset correlated noise)."""

    def on_episode_end(self, policy: Any = None, **kwargs: Any) -> None:
        """Hook at the end of each episode."""

    def get_info(self, sess: Any = None) -> dict[str, Any]:
        """Values worth reporting (e.g. the current epsilon). `sess` (here and in
        `get_state` / `set_state`): RLlib 1.13's TensorFlow session, unused by torch."""
        return {}

    def get_exploration_optimizer(self, optimizers: list[Any]) -> list[Any]:
        """The policy's optimizers, with any this exploration adds for loss terms of
        its own (RLlib 1.13's hook); by default `optimizers` unchanged. `Curiosity`
        keeps its ICM optimizer to itself (it steps it in `postprocess_trajectory`)."""
        return optimizers

    def get_state(self, sess: Any = None) -> dict[str, Any]:
        """JSON-able state, saved with the policy."""
        return {"last_timestep": self.last_timestep}

    def set_state(self, state: dict[str, Any], sess: Any = None) -> None:
        self.last_timestep = int(state.get("last_timestep", self.last_timestep))


class DelegatingExploration(Exploration):
    """An exploration whose actions come from a sub-exploration (`exploration_submodule`,
    built by `make_submodule`): Curiosity and RE3, which only change the batches. The
    acting, episode hooks, info and state go to the sub-exploration."""

    exploration_submodule: Exploration

    def make_submodule(self, config: dict) -> Exploration:
        """The sub-exploration of `exploration_config` `config`, for this policy."""
        from corral.utils.exploration import make_exploration

        return make_exploration(
            config,
            self.action_space,
            self.policy_config,
            self.model,
            num_workers=self.num_workers,
            worker_index=self.worker_index,
        )

    def get_exploration_action(
        self, action_distribution: Any, timestep: int | None = None, explore: bool = True
    ) -> tuple[Any, Any]:
        """The sub-exploration's actions."""
        self._timestep(timestep)
        return self.exploration_submodule.get_exploration_action(
            action_distribution, timestep, explore
        )

    def on_episode_start(self, policy: Any = None, **kwargs: Any) -> None:
        self.exploration_submodule.on_episode_start(policy=policy, **kwargs)

    def on_episode_end(self, policy: Any = None, **kwargs: Any) -> None:
        self.exploration_submodule.on_episode_end(policy=policy, **kwargs)

    def get_info(self, sess: Any = None) -> dict[str, Any]:
        return self.exploration_submodule.get_info()

    def get_state(self, sess: Any = None) -> dict[str, Any]:
        return {**super().get_state(), "sub_exploration": self.exploration_submodule.get_state()}

    def set_state(self, state: dict[str, Any], sess: Any = None) -> None:
        super().set_state(state)
        if "sub_exploration" in state:
            self.exploration_submodule.set_state(state["sub_exploration"])


def overrides(exploration: Exploration, hook: str) -> bool:
    """Whether `exploration`'s class overrides the base class's no-op `hook`."""
    return getattr(type(exploration), hook) is not getattr(Exploration, hook)


def zero_logp(actions: torch.Tensor) -> torch.Tensor:
    """Log-likelihood 0 per row: greedy or uniform choices made outside the distribution."""
    return torch.zeros(actions.shape[0], dtype=torch.float32)


def random_actions(action_space: gym.Space, n: int, low_high: tuple | None = None) -> torch.Tensor:
    """`n` uniform random actions of a Discrete, MultiDiscrete, integer Box or bounded
    Box space."""
    if isinstance(action_space, gym.spaces.Discrete):
        return torch.randint(int(action_space.n), (n,)) + int(action_space.start)
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        nvec = torch.as_tensor(action_space.nvec.reshape(-1))
        draws = (torch.rand(n, len(nvec)) * nvec).long()
        return draws.reshape(n, *action_space.shape)
    if is_int_box(action_space):
        # Each element uniform over its values low..high (int64, as the policy's own).
        low_i = torch.from_numpy(action_space.low.astype(np.int64))
        span = torch.from_numpy(action_space.high.astype(np.int64)) - low_i + 1
        return low_i + (torch.rand(n, *action_space.shape, dtype=torch.float64) * span).long()
    if isinstance(action_space, gym.spaces.Box):
        low, high = low_high if low_high is not None else (action_space.low, action_space.high)
        low_t, high_t = torch.as_tensor(low), torch.as_tensor(high)
        if not (torch.isfinite(low_t).all() and torch.isfinite(high_t).all()):
            # Unbounded dimensions: a standard normal draw instead.
            return torch.randn(n, *action_space.shape)
        return low_t + torch.rand(n, *action_space.shape) * (high_t - low_t)
    raise ValueError(f"No uniform random actions for action space {action_space}.")
