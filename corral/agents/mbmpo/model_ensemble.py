"""MB-MPO's learned dynamics: an ensemble of transition-dynamics (TD) models.

Clavera et al. 2018, "Model-Based Reinforcement Learning via Meta-Policy Optimization"
(arXiv:1809.05214), sec. 4.1: `ensemble_size` fully connected nets, each predicting the
change of the observation, ``o' - o``, from the observation and the action. Every member
is trained with the L2 loss on its own random train/validation split of the real
transitions (the last `REPLAY_BUFFER_MAX` of them), with early stopping on its validation
loss, so the members differ where the data leave the dynamics open: those differences are
the tasks MB-MPO meta-learns over. With `normalize_data` the inputs and the predicted change
are normalised with the data's means and standard deviations, which are part of the
ensemble's state (buffers), so that syncing or checkpointing its `state_dict` carries them.

The driver's policy holds the ensemble and fits it (`fit`); each rollout worker's policy
holds a copy and steps the model with index ``(worker_index - 1) % ensemble_size``
(`ModelVectorEnv`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.evaluation.rollout_worker import get_global_worker
from corral.execution.common import STEPS_SAMPLED_COUNTER
from corral.models.torch.torch_modelv2 import TorchModelV2
from corral.policy.sample_batch import SampleBatch
from corral.utils.error import UnsupportedSpaceException

# How many real transitions the ensemble keeps (the most recent ones; RLlib's size).
REPLAY_BUFFER_MAX = 10000
# The normalisation statistics' key of the observation change ``o' - o``.
DELTA = "delta"
# Its share of the rolling validation loss, an epoch's validation loss (RLlib's rule).
_ROLL_KEEP = 0.95

# (mean, std) per column.
Stats = tuple[np.ndarray, np.ndarray]


class TDModel(nn.Module):
    """A transition-dynamics model: a fully connected net (with weight normalisation).

    Args:
        input_size: observation size + action size (one-hot for `Discrete`).
        output_size: observation size (the predicted change of the observation).
        hidden_layers: the hidden layers' sizes (at least one).
        hidden_nonlinearity: the hidden layers' activation class (default `nn.ReLU`).
        output_nonlinearity: an activation class after the last layer (default none).
        weight_normalization: reparameterise each layer's weight as ``g * v / |v|``
            (Salimans & Kingma 2016).
        use_bias: layers with biases.
    """

    def __init__(
        self,
        input_size: int,
        output_size: int,
        hidden_layers: Sequence[int] = (512, 512),
        hidden_nonlinearity: type[nn.Module] | None = None,
        output_nonlinearity: type[nn.Module] | None = None,
        weight_normalization: bool = False,
        use_bias: bool = True,
    ) -> None:
        super().__init__()
        if len(hidden_layers) < 1:
            raise ValueError(f"A TDModel needs at least one hidden layer, got {hidden_layers!r}.")
        activation = hidden_nonlinearity or nn.ReLU
        layers: list[nn.Module] = []
        sizes = [input_size, *hidden_layers]
        for size_in, size_out in zip(sizes[:-1], sizes[1:]):
            layers += [_linear(size_in, size_out, use_bias, weight_normalization), activation()]
        layers.append(_linear(sizes[-1], output_size, use_bias, weight_normalization))
        if output_nonlinearity is not None:
            layers.append(output_nonlinearity())
        self.layers = layers
        self.model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


def _linear(size_in: int, size_out: int, bias: bool, weight_norm: bool) -> nn.Module:
    return (
        WeightNormLinear(size_in, size_out, bias)
        if weight_norm
        else nn.Linear(size_in, size_out, bias)
    )


class WeightNormLinear(nn.Module):
    """A linear layer whose weight is ``g * v / |v|`` (each output row's norm is its own
    parameter `weight_g`; Salimans & Kingma 2016, arXiv:1602.07868), initialised as
    `nn.Linear`. (torch's parametrized modules cannot be pickled, and rollout workers'
    objects may be.)"""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        init = nn.Linear(in_features, out_features, bias=bias)
        self.in_features, self.out_features = in_features, out_features
        self.weight_v = nn.Parameter(init.weight.detach().clone())
        self.weight_g = nn.Parameter(init.weight.detach().norm(dim=1, keepdim=True))
        self.bias = init.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight_g * self.weight_v / self.weight_v.norm(dim=1, keepdim=True)
        return nn.functional.linear(x, weight, self.bias)


def normalize(data_array: np.ndarray, stats: Stats) -> np.ndarray:
    """``(data - mean) / (std + 1e-10)``."""
    mean, std = stats
    return (data_array - mean) / (std + 1e-10)


def denormalize(data_array: np.ndarray, stats: Stats) -> np.ndarray:
    """The inverse of `normalize`."""
    mean, std = stats
    return data_array * (std + 1e-10) + mean


def mean_std_stats(dataset: Mapping[str, np.ndarray]) -> dict[str, Stats]:
    """Per-column (mean, std) of the observations, the actions and the observation change
    ``new_obs - obs`` of `dataset`, under "obs", "actions" and "delta". A column that does
    not vary gets std 1 (not 0), so that normalising a new value of it stays finite."""
    obs = np.asarray(dataset[SampleBatch.OBS], np.float64)
    columns = {
        SampleBatch.OBS: obs,
        SampleBatch.ACTIONS: np.asarray(dataset[SampleBatch.ACTIONS], np.float64),
        DELTA: np.asarray(dataset[SampleBatch.NEXT_OBS], np.float64) - obs,
    }
    stats = {}
    for key, values in columns.items():
        std = values.std(axis=0)
        stats[key] = (values.mean(axis=0), np.where(std > 1e-8, std, 1.0))
    return stats


def process_samples(samples: Mapping[str, Any]) -> SampleBatch:
    """The columns the ensemble learns from: "obs", "actions", "new_obs"."""
    keys = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.NEXT_OBS)
    return SampleBatch({key: np.asarray(samples[key]) for key in keys})


def model_action_size(action_space: gym.Space) -> int:
    """How many inputs an action takes in the ensemble (one-hot for `Discrete`).

    Raises:
        UnsupportedSpaceException: not a `Discrete` nor a 1-D `Box`.
    """
    if isinstance(action_space, gym.spaces.Discrete):
        return int(action_space.n)
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
        return int(action_space.shape[0])
    raise UnsupportedSpaceException(
        f"Action space {action_space} is not supported by MB-MPO's dynamics ensemble: "
        "expected a Discrete or a 1-D Box."
    )


def model_actions(action_space: gym.Space, actions: Any) -> np.ndarray:
    """`actions` as the ensemble's input rows: one-hot for `Discrete`, float32 rows else."""
    actions = np.asarray(actions)
    if isinstance(action_space, gym.spaces.Discrete):
        return np.eye(int(action_space.n), dtype=np.float32)[actions.astype(np.int64).reshape(-1)]
    return actions.astype(np.float32).reshape(len(actions), -1)


class DynamicsEnsembleCustomModel(TorchModelV2, nn.Module):
    """An ensemble of `TDModel`s predicting ``new_obs - obs`` from (obs, action).

    Args:
        obs_space: the env's observation space (a 1-D `Box`; predictions are clipped to it).
        action_space: the env's action space (`Discrete` or a 1-D `Box`).
        num_outputs: the observation size.
        model_config: the `dynamics_model` config: `ensemble_size`, `fcnet_hiddens`, `lr`,
            `train_epochs`, `batch_size`, `valid_split_ratio`, `normalize_data`.
        name: the model's name.
        worker_index: the rollout worker holding this copy; worker ``i >= 1`` steps model
            ``(i - 1) % ensemble_size`` (None: the global worker's index, RLlib's way).

    Raises:
        UnsupportedSpaceException: an observation space that is not a 1-D `Box`, or an
            action space that is neither `Discrete` nor a 1-D `Box`.
    """

    def __init__(
        self,
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int | None,
        model_config: dict,
        name: str,
        worker_index: int | None = None,
    ) -> None:
        nn.Module.__init__(self)
        if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1):
            raise UnsupportedSpaceException(
                f"Observation space {obs_space} is not supported by MB-MPO's dynamics "
                "ensemble: expected a 1-D Box."
            )
        obs_size = int(obs_space.shape[0])
        input_space = gym.spaces.Box(
            -np.inf, np.inf, (obs_size + model_action_size(action_space),), np.float32
        )
        super().__init__(input_space, action_space, num_outputs, model_config, name)
        # The env's own observation space: predictions are clipped to it.
        self.env_obs_space = obs_space
        self.num_models = int(model_config["ensemble_size"])
        self.max_epochs = int(model_config["train_epochs"])
        self.lr = float(model_config["lr"])
        self.valid_split = float(model_config["valid_split_ratio"])
        self.batch_size = int(model_config["batch_size"])
        self.normalize_data = bool(model_config["normalize_data"])
        self.dynamics_ensemble = nn.ModuleList(
            TDModel(
                input_size=int(input_space.shape[0]),
                output_size=obs_size,
                hidden_layers=model_config["fcnet_hiddens"],
                hidden_nonlinearity=nn.ReLU,
                weight_normalization=True,
            )
            for _ in range(self.num_models)
        )
        # The normalisation statistics (identity until the first fit).
        for key, size in (
            (SampleBatch.OBS, obs_size),
            (SampleBatch.ACTIONS, input_space.shape[0] - obs_size),
            (DELTA, obs_size),
        ):
            self.register_buffer(f"{key}_mean", torch.zeros(size))
            self.register_buffer(f"{key}_std", torch.ones(size))
        self.replay_buffer_max = REPLAY_BUFFER_MAX
        self.replay_buffer: SampleBatch | None = None
        # One Adam over every member: its updates are per parameter, so this is one Adam
        # per member; a member stopped early has no gradient, which Adam skips.
        self.optimizer = torch.optim.Adam(self.dynamics_ensemble.parameters(), lr=self.lr)
        # The real env steps fitted on so far (RLlib's `metrics` dict, whose name is
        # `ModelV2.metrics()` here).
        self.fit_metrics: dict[str, int] = {STEPS_SAMPLED_COUNTER: 0}
        if worker_index is None:
            worker = get_global_worker()
            worker_index = worker.worker_index if worker is not None else 0
        self.sample_index = (worker_index - 1) % self.num_models if worker_index >= 1 else 0
        # Fits done so far.
        self.global_itr = 0

    @property
    def device(self) -> torch.device:
        """Where the ensemble's parameters are."""
        return next(self.dynamics_ensemble.parameters()).device

    # -- prediction ------------------------------------------------------------------

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        """The (normalised) observation change predicted by model `sample_index` from the
        (normalised) inputs ``[obs, action]``."""
        return self.dynamics_ensemble[self.sample_index](x)

    def predict_model_batches(
        self, obs: np.ndarray, actions: np.ndarray, device: Any = None
    ) -> np.ndarray:
        """The next observations model `sample_index` predicts for a batch of observations
        and actions as the env takes them (integers for `Discrete`), clipped to the
        observation space."""
        obs = np.asarray(obs, np.float32)
        x = self._inputs(obs, model_actions(self.action_space, actions))
        with torch.no_grad():
            delta = self.forward(torch.as_tensor(x, device=device or self.device)).cpu().numpy()
        if self.normalize_data:
            delta = denormalize(delta, self._stats(DELTA))
        low, high = self.env_obs_space.low, self.env_obs_space.high
        return np.clip(obs + delta, low, high).astype(self.env_obs_space.dtype)

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
        """The L2 loss of each member on its chunk of (`x`, `y`) (the rows are split into
        `ensemble_size` equal chunks, member-major)."""
        return [
            torch.mean((model(xs) - ys) ** 2)
            for model, xs, ys in zip(
                self.dynamics_ensemble,
                torch.chunk(x, self.num_models),
                torch.chunk(y, self.num_models),
            )
        ]

    # -- normalisation ---------------------------------------------------------------

    @property
    def normalizations(self) -> dict[str, Stats]:
        """The (mean, std) of "obs", "actions" and "delta" (empty without
        `normalize_data`)."""
        if not self.normalize_data:
            return {}
        return {key: self._stats(key) for key in (SampleBatch.OBS, SampleBatch.ACTIONS, DELTA)}

    def set_norms(self, normalization_dict: Mapping[str, Stats]) -> None:
        """Sets the statistics `normalizations` returns."""
        for key, (mean, std) in normalization_dict.items():
            getattr(self, f"{key}_mean").copy_(torch.as_tensor(np.asarray(mean)))
            getattr(self, f"{key}_std").copy_(torch.as_tensor(np.asarray(std)))

    def _stats(self, key: str) -> Stats:
        return (
            getattr(self, f"{key}_mean").cpu().numpy(),
            getattr(self, f"{key}_std").cpu().numpy(),
        )

    def _inputs(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        if self.normalize_data:
            obs = normalize(obs, self._stats(SampleBatch.OBS))
            actions = normalize(actions, self._stats(SampleBatch.ACTIONS))
        return np.concatenate([obs, actions], axis=-1).astype(np.float32)

    # -- fitting ---------------------------------------------------------------------

    def fit(self, samples: Mapping[str, Any]) -> dict[str, Any]:
        """Adds real transitions to the replay buffer and trains every member on it.

        Each member draws its own train/validation split (`valid_split_ratio`) and trains
        on shuffled minibatches of `batch_size` for up to `train_epochs` epochs; it stops
        once its rolling validation loss (``0.95 * previous + 0.05 * this epoch's``)
        rises.

        Args:
            samples: "obs", "new_obs" and "actions" as the env took them (env space;
                integers for `Discrete`).

        Returns:
            `fit_metrics` (the real steps fitted on so far) plus this fit's "epochs", each
            member's "train_loss" (last epoch's mean) and "valid_loss" (its last epoch's).
        """
        new = process_samples(samples)
        new[SampleBatch.ACTIONS] = model_actions(self.action_space, new[SampleBatch.ACTIONS])
        buffer = new if self.replay_buffer is None else self.replay_buffer.concat(new)
        self.replay_buffer = buffer.slice(
            max(0, buffer.count - self.replay_buffer_max), buffer.count
        )
        if self.replay_buffer.count < 2:
            raise ValueError(
                "The dynamics ensemble needs at least 2 real transitions to fit (one to train "
                f"on, one to validate on), got {self.replay_buffer.count}."
            )
        if self.normalize_data:
            self.set_norms(mean_std_stats(self.replay_buffer))
        self.fit_metrics[STEPS_SAMPLED_COUNTER] += new.count
        stats = self._train(*self._dataset(self.replay_buffer))
        self.global_itr += 1
        return {**self.fit_metrics, **stats}

    def _dataset(self, data: SampleBatch) -> tuple[torch.Tensor, torch.Tensor]:
        obs = np.asarray(data[SampleBatch.OBS], np.float32)
        delta = np.asarray(data[SampleBatch.NEXT_OBS], np.float32) - obs
        if self.normalize_data:
            delta = normalize(delta, self._stats(DELTA))
        x = self._inputs(obs, np.asarray(data[SampleBatch.ACTIONS], np.float32))
        return (
            torch.as_tensor(x, device=self.device),
            torch.as_tensor(delta.astype(np.float32), device=self.device),
        )

    def split_train_val(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        """A random split of `count` rows into train and validation row indices (at least
        one of each)."""
        indices = np.random.permutation(count)
        split = min(max(int(count * (1 - self.valid_split)), 1), count - 1)
        return indices[:split], indices[split:]

    def _train(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, Any]:
        splits = [self.split_train_val(len(x)) for _ in range(self.num_models)]
        num_batches = math.ceil(len(splits[0][0]) / self.batch_size)
        training = list(range(self.num_models))
        train_losses = np.zeros(self.num_models)
        valid_losses = np.zeros(self.num_models)
        roll = roll_prev = np.zeros(self.num_models)
        epochs = 0
        for epoch in range(self.max_epochs):
            epochs += 1
            orders = {i: np.random.permutation(splits[i][0]) for i in training}
            sums = np.zeros(self.num_models)
            for b in range(num_batches):
                rows = {
                    i: orders[i][b * self.batch_size : (b + 1) * self.batch_size] for i in training
                }
                losses = {i: self._member_loss(i, x, y, rows[i]) for i in training}
                self.optimizer.zero_grad(set_to_none=True)
                torch.stack(list(losses.values())).sum().backward()
                self.optimizer.step()
                for i, loss in losses.items():
                    sums[i] += float(loss.detach())
            for i in training:
                train_losses[i] = sums[i] / num_batches
            with torch.no_grad():
                valid_losses = np.array(
                    [
                        float(self._member_loss(i, x, y, splits[i][1]))
                        for i in range(self.num_models)
                    ]
                )
            if epoch == 0:
                # The first rolling average cannot stop training (RLlib's start values).
                roll, roll_prev = 1.5 * valid_losses, 2.0 * valid_losses
            roll = _ROLL_KEEP * roll + (1 - _ROLL_KEEP) * valid_losses
            last = epoch == self.max_epochs - 1
            training = [i for i in training if not (roll_prev[i] < roll[i] or last)]
            roll_prev = roll
            if not training:
                break
        return {
            "epochs": epochs,
            "train_loss": train_losses.tolist(),
            "valid_loss": valid_losses.tolist(),
        }

    def _member_loss(
        self, i: int, x: torch.Tensor, y: torch.Tensor, rows: np.ndarray
    ) -> torch.Tensor:
        index = torch.as_tensor(rows, device=x.device)
        return torch.mean((self.dynamics_ensemble[i](x[index]) - y[index]) ** 2)

    # -- state -----------------------------------------------------------------------

    def get_ensemble_state(self) -> dict[str, Any]:
        """Everything a checkpoint needs to continue fitting as this ensemble would: the
        weights and statistics (`state_dict`), the optimiser's state, the replay buffer and
        the counters; numpy arrays and JSON-able values only."""
        buffer = self.replay_buffer
        return {
            "weights": {k: v.detach().cpu().numpy() for k, v in self.state_dict().items()},
            "optimizer": _tensors_to_numpy(self.optimizer.state_dict()),
            "replay_buffer": {}
            if buffer is None
            else {k: np.asarray(v) for k, v in buffer.items()},
            "global_itr": self.global_itr,
            "fit_metrics": dict(self.fit_metrics),
        }

    def set_ensemble_state(self, state: Mapping[str, Any]) -> None:
        """Restores what `get_ensemble_state` returned."""
        self.load_state_dict(
            {
                k: torch.as_tensor(np.asarray(v), device=self.device)
                for k, v in state["weights"].items()
            }
        )
        optimizer = state.get("optimizer")
        if optimizer:
            self.optimizer.load_state_dict(_optimizer_state_from_numpy(optimizer))
        buffer = state.get("replay_buffer") or {}
        self.replay_buffer = SampleBatch(dict(buffer)) if buffer else None
        self.global_itr = int(state.get("global_itr", 0))
        counters = state.get("fit_metrics") or {}
        self.fit_metrics = {k: int(v) for k, v in counters.items()} or self.fit_metrics


def _tensors_to_numpy(node: Any) -> Any:
    if torch.is_tensor(node):
        return node.detach().cpu().numpy()
    if isinstance(node, Mapping):
        return {str(k): _tensors_to_numpy(v) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [_tensors_to_numpy(v) for v in node]
    return node


def _optimizer_state_from_numpy(state: Mapping[str, Any]) -> dict[str, Any]:
    """An optimiser `state_dict` from `_tensors_to_numpy`'s form (string keys, arrays)."""
    per_param = {
        int(k): {name: torch.as_tensor(np.asarray(v)) for name, v in values.items()}
        for k, values in state["state"].items()
    }
    groups = [dict(g, params=[int(p) for p in g["params"]]) for g in state["param_groups"]]
    return {"state": per_param, "param_groups": groups}


__all__ = [
    "DynamicsEnsembleCustomModel",
    "TDModel",
    "denormalize",
    "mean_std_stats",
    "normalize",
    "process_samples",
]
