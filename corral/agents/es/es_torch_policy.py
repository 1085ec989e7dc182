"""`ESTorchPolicy`: a torch model acted with through flat weights, no loss (ES and ARS).

Evolution strategies never back-propagate: the trainer and its workers read and write
all weights as one float32 vector (`get_flat_weights` / `set_flat_weights`, the model's
state-dict entries in sorted-name order), and the policy filters its own observations
(`observation_filter`, e.g. MeanStdFilter), as RLlib 1.13's ES policy does; rollout
workers filter with it themselves: `compute_actions` (raw observations, RLlib's ES API)
filters, `compute_actions_from_obs` (what corral's rollout workers call with observations
their worker filter already filtered) does not. The trainer makes its local worker's filter
this very object, so acting and checkpoints see one filter.
Box actions come from a deterministic head (the model output itself), plus Gaussian
`action_noise_std` noise in the ES workers' rollouts; other spaces are sampled from
their distribution.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from corral.models.catalog import ModelCatalog
from corral.models.torch.torch_modelv2 import TorchModelV2
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_policy import TorchPolicy
from corral.utils.filter import Filter, get_filter
from corral.utils.spaces import is_int_box


def before_init(
    policy: ESTorchPolicy, observation_space: gym.Space, action_space: gym.Space, config: dict
) -> None:
    """Sets what the model does not hold: the action noise and the observation filter
    (of the preprocessed observation's shape)."""
    policy.action_noise_std = float(config["action_noise_std"])
    policy.observation_filter = get_filter(config["observation_filter"], policy.preprocessor.shape)


def after_init(
    policy: ESTorchPolicy, observation_space: gym.Space, action_space: gym.Space, config: dict
) -> None:
    """Records the shape of each model weight (sorted by name) and their total count."""
    state = policy.model.state_dict()
    policy.param_shapes = {k: tuple(state[k].shape) for k in sorted(state)}
    policy.num_params = int(sum(int(np.prod(s)) for s in policy.param_shapes.values()))


def make_model_and_action_dist(
    policy: ESTorchPolicy, observation_space: gym.Space, action_space: gym.Space, config: dict
) -> tuple[TorchModelV2, type]:
    """The policy network (no gradients) and its action distribution: deterministic
    for float Box actions, the space's default otherwise (integer Box: categoricals)."""
    float_box = isinstance(action_space, gym.spaces.Box) and not is_int_box(action_space)
    dist_type = "deterministic" if float_box else None
    dist_class, num_outputs = ModelCatalog.get_action_dist(
        action_space, config["model"], dist_type=dist_type, framework="torch"
    )
    model = ModelCatalog.get_model_v2(
        policy.preprocessor.observation_space,
        action_space,
        num_outputs,
        config["model"],
        framework="torch",
    )
    for p in model.parameters():
        p.requires_grad_(False)
    return model, dist_class


class ESTorchPolicy(TorchPolicy):
    """The policy of `ESTrainer` (and, as `ARSTorchPolicy`, of `ARSTrainer`).

    Attributes:
        observation_filter: the policy's own observation filter.
        action_noise_std: std of the Gaussian noise added to float Box actions when
            `compute_actions(..., add_noise=True)`.
        param_shapes: weight name -> shape, in flat-vector order.
        num_params: length of the flat weight vector.
    """

    observation_filter: Filter
    action_noise_std: float
    param_shapes: dict[str, tuple[int, ...]]
    num_params: int

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        super().__init__(observation_space, action_space, config)
        before_init(self, observation_space, action_space, config)
        after_init(self, observation_space, action_space, config)
        self._rng = np.random.default_rng()

    def make_model(self, num_outputs: int) -> TorchModelV2:
        model, self.dist_class = make_model_and_action_dist(
            self, self.observation_space, self.action_space, self.config
        )
        return model

    # -- flat weights -------------------------------------------------------

    def get_flat_weights(self) -> np.ndarray:
        """All weights as one float32 vector (state-dict entries in sorted-name order)."""
        state = self.model.state_dict()
        return torch.cat([state[k].reshape(-1) for k in self.param_shapes]).cpu().numpy()

    def set_flat_weights(self, theta: np.ndarray) -> None:
        """Loads a vector of `get_flat_weights`'s layout into the model.

        Raises:
            ValueError: `theta` has not `num_params` entries.
        """
        theta = np.asarray(theta, dtype=np.float32)
        if theta.shape != (self.num_params,):
            raise ValueError(
                f"Flat weights of shape {theta.shape} for a policy of {self.num_params} weights."
            )
        pos, state = 0, {}
        for name, shape in self.param_shapes.items():
            size = int(np.prod(shape))
            state[name] = torch.from_numpy(theta[pos : pos + size].reshape(shape).copy())
            pos += size
        with self._lock:
            self.model.load_state_dict(state)

    # -- acting -------------------------------------------------------------

    def seed(self, seed: int | None) -> None:
        """Seeds the action noise (the action sampling uses torch's generator)."""
        self._rng = np.random.default_rng(seed)

    def _forward(self, filtered: np.ndarray, add_noise: bool) -> np.ndarray:
        """Actions for a batch of preprocessed, filtered observations."""
        with torch.inference_mode():
            dist_inputs, _ = self.model(
                {SampleBatch.OBS: torch.as_tensor(filtered, dtype=torch.float32)}, [], None
            )
            actions = self.dist_class(dist_inputs, self.model).sample().cpu().numpy()
        space = self.action_space
        if add_noise and isinstance(space, gym.spaces.Box) and space.dtype.kind == "f":
            actions = actions + self._rng.standard_normal(actions.shape) * self.action_noise_std
            actions = actions.astype(space.dtype)
        return actions

    def compute_actions(  # type: ignore[override]
        self,
        obs_batch: Any,
        state_batches: list | None = None,
        prev_action_batch: Any = None,
        prev_reward_batch: Any = None,
        info_batch: Any = None,
        episodes: list | None = None,
        explore: bool | None = None,
        timestep: int | None = None,
        *,
        add_noise: bool = False,
        update: bool = True,
        **kwargs: Any,
    ) -> tuple[np.ndarray, list, dict]:
        """Actions for a batch of raw observations (RLlib 1.13's ES signature).

        Args:
            obs_batch: a list (or array) of env observations.
            add_noise: add `action_noise_std` noise to float Box actions.
            update: add the observations to the filter's statistics.

        Returns:
            (actions, [], {}).
        """
        obs = self.preprocessor.transform_batch(list(obs_batch))
        filtered = self.observation_filter(obs, update=update)
        return self._forward(filtered, add_noise), [], {}

    def compute_single_action(  # type: ignore[override]
        self,
        observation: Any,
        *args: Any,
        add_noise: bool = False,
        update: bool = True,
        **kwargs: Any,
    ) -> tuple[Any, list, dict]:
        """`compute_actions` for one raw observation: (action, [], {})."""
        actions, state_out, extra = self.compute_actions(
            [observation], add_noise=add_noise, update=update
        )
        return actions[0], state_out, extra

    def compute_actions_from_obs(
        self,
        obs: np.ndarray,
        explore: bool | None = None,
        state: list[np.ndarray] | None = None,
        prev_actions: np.ndarray | None = None,
        prev_rewards: np.ndarray | None = None,
        view_inputs: dict[str, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Actions for preprocessed observations that the caller's worker filter already
        filtered (rollout workers, `Trainer.compute_single_action`); no action noise."""
        return self._forward(obs, add_noise=False), {}


__all__ = ["ESTorchPolicy", "after_init", "before_init", "make_model_and_action_dist"]
