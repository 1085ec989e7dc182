"""`MinariReader`: Farama Minari datasets as offline input (``input="minari://<dataset id>"``)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from corral.offline.adapt import adapt_batch, postprocess_if_needed
from corral.offline.input_reader import InputReader, SampleBatchType
from corral.offline.io_context import IOContext
from corral.offline.json_reader import rng_for
from corral.policy.sample_batch import SampleBatch


def _load(dataset_id: str) -> Any:
    try:
        import minari
    except ImportError as err:
        raise ImportError(
            "Minari input needs the `minari` package: pip install 'corral[minari]'."
        ) from err
    try:
        return minari.load_dataset(dataset_id)
    except (FileNotFoundError, ValueError) as err:
        raise ValueError(
            f"input='minari:{dataset_id}': no such local Minari dataset ({err}); datasets are "
            "looked up in MINARI_DATASETS_PATH (default ~/.minari/datasets)."
        ) from err


def _flat(values: Any, space: gym.Space) -> np.ndarray:
    """A sequence of observations as rows: Box as it is, other spaces flattened (one-hot
    Discrete, concatenated Dict/Tuple leaves), as corral's preprocessors give them."""
    if isinstance(space, gym.spaces.Box):
        arr = np.asarray(values)
        return arr.astype(np.float32) if arr.dtype == np.float64 else arr
    if isinstance(values, dict | tuple):  # Minari stores Dict/Tuple observations by leaf
        first = next(iter(values.values())) if isinstance(values, dict) else values[0]
        items: list[Any] = [_row(values, i) for i in range(len(first))]
    else:
        items = list(values)
    rows = [np.asarray(gym.spaces.utils.flatten(space, x)) for x in items]
    return np.stack(rows).astype(np.float32)


def _row(values: Any, i: int) -> Any:
    if isinstance(values, dict):
        return {k: _row(v, i) for k, v in values.items()}
    if isinstance(values, tuple):
        return tuple(_row(v, i) for v in values)
    return values[i]


def episode_to_batch(episode: Any, observation_space: gym.Space) -> SampleBatch:
    """One Minari `EpisodeData` as a `SampleBatch` of RLlib's columns."""
    obs = _flat(episode.observations, observation_space)
    n = len(episode.rewards)
    terminateds = np.asarray(episode.terminations, dtype=bool)
    truncateds = np.asarray(episode.truncations, dtype=bool)
    actions = np.asarray(episode.actions)
    if actions.dtype == np.float64:
        actions = actions.astype(np.float32)
    return SampleBatch(
        {
            SampleBatch.OBS: obs[:n],
            SampleBatch.NEXT_OBS: obs[1 : n + 1],
            SampleBatch.ACTIONS: actions,
            SampleBatch.REWARDS: np.asarray(episode.rewards, dtype=np.float32),
            SampleBatch.TERMINATEDS: terminateds,
            SampleBatch.TRUNCATEDS: truncateds,
            SampleBatch.DONES: terminateds | truncateds,
            SampleBatch.EPS_ID: np.full(n, int(episode.id), dtype=np.int64),
            SampleBatch.T: np.arange(n, dtype=np.int64),
            SampleBatch.AGENT_INDEX: np.zeros(n, dtype=np.int64),
        }
    )


class MinariReader(InputReader):
    """Whole episodes of a local Minari dataset, in a random order, one per `next()`.

    Args:
        dataset_id: the dataset's id (as `minari.load_dataset` takes it).
        ioctx: the worker's IO context.
    """

    def __init__(self, dataset_id: str, ioctx: IOContext | None = None) -> None:
        self.ioctx = ioctx or IOContext()
        self.dataset_id = dataset_id
        self.dataset = _load(dataset_id)
        self.observation_space = self.dataset.observation_space
        self.episode_indices = np.asarray(self.dataset.episode_indices)
        if len(self.episode_indices) == 0:
            raise ValueError(f"Minari dataset {dataset_id!r} holds no episodes.")
        self._rng = rng_for(self.ioctx)
        self._order: list[int] = []

    def next(self) -> SampleBatchType:
        if not self._order:  # a new pass over the episodes, freshly shuffled
            self._order = self._rng.permutation(self.episode_indices).tolist()
        index = self._order.pop()
        episode = next(iter(self.dataset.iterate_episodes([index])))
        where = f"Minari dataset {self.dataset_id!r}, episode {index}"
        batch = adapt_batch(episode_to_batch(episode, self.observation_space), self.ioctx, where)
        return postprocess_if_needed(batch, self.ioctx)

    def read_all_files(self) -> Any:
        """Every episode once, in the dataset's order."""
        for episode in self.dataset.iterate_episodes():
            yield episode_to_batch(episode, self.observation_space)
