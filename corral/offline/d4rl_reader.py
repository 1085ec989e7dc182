"""`D4RLReader`: RLlib 1.13's reader of D4RL datasets (``input="d4rl.<env name>"``).

D4RL (``import d4rl``) registers its offline-RL envs with the old `gym` package; each env
downloads its dataset, and `d4rl.qlearning_dataset(env)` gives it as transitions (arrays
``observations``, ``actions``, ``rewards``, ``next_observations``, ``terminals``). The
reader turns them into one `SampleBatch` and hands out one random row per `next()`, as
RLlib 1.13 did.

The `d4rl` package is unmaintained (it needs gym 0.23-era envs and mujoco-py) and is not a
dependency of corral: it is imported when a reader is built, and its absence is a clear
`ImportError`. Its datasets moved to Farama's Minari, which corral reads with
``input="minari://<dataset id>"`` (`corral.offline.minari_reader.MinariReader`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from corral.env.gym_compat import convert_space
from corral.offline.adapt import adapt_batch, postprocess_if_needed
from corral.offline.input_reader import InputReader, SampleBatchType
from corral.offline.io_context import IOContext
from corral.offline.json_reader import rng_for
from corral.policy.sample_batch import SampleBatch
from corral.utils import numpy_compat

# The arrays of `d4rl.qlearning_dataset`'s dict, each with the RLlib column it becomes.
_COLUMNS = {
    "observations": SampleBatch.OBS,
    "actions": SampleBatch.ACTIONS,
    "rewards": SampleBatch.REWARDS,
    "next_observations": SampleBatch.NEXT_OBS,
    "terminals": SampleBatch.DONES,
}


def _import_d4rl() -> Any:
    try:
        import d4rl
    except ImportError as err:
        raise ImportError(
            "D4RLReader (input='d4rl.<env name>') needs the `d4rl` package, which is not "
            "installed; it is unmaintained and no longer installs with current gym/mujoco. "
            "The D4RL datasets are published on Farama's Minari: corral reads them with "
            "input='minari://<dataset id>' (e.g. 'minari://mujoco/hopper/medium-v0'; pip "
            "install 'corral[minari]', then `minari download <dataset id>`)."
        ) from err
    return d4rl


def _make_env(env_name: str) -> Any:
    """D4RL's env `env_name`, made with the old `gym` package, where d4rl registers its
    envs (its `get_dataset()` is what `qlearning_dataset` reads; a Gymnasium wrapper
    would hide it)."""
    numpy_compat.install()  # gym 0.23 uses NumPy 1.x names (np.bool8)
    import gym as old_gym  # installed with d4rl, which depends on it

    try:
        return old_gym.make(env_name)
    except old_gym.error.Error as err:
        raise ValueError(
            f"input='d4rl.{env_name}': {env_name!r} is not an env d4rl registers ({err}); "
            "expected a D4RL env name such as 'hopper-medium-v2'."
        ) from err


def convert_to_batch(dataset: Mapping[str, Any]) -> SampleBatch:
    """A D4RL transition dict (what `d4rl.qlearning_dataset` returns) as one `SampleBatch`.

    The columns are RLlib's: ``obs``, ``actions``, ``rewards``, ``new_obs``, ``dones``
    (from ``terminals``); plus corral's ``terminateds`` (the same flags: D4RL's terminals
    are true ends), ``truncateds`` (all False: `qlearning_dataset` leaves out the steps
    cut by a time limit) and ``eps_id`` / ``t`` (the episodes, for postprocessing: a
    row starts one after a terminal row or where the previous row's next observation is
    not its observation). Floats are float32 (corral's batches are float32 throughout).

    Args:
        dataset: a mapping with the arrays ``observations``, ``actions``, ``rewards``,
            ``next_observations`` and ``terminals``, one row per transition.

    Raises:
        ValueError: an array is missing or the arrays differ in length.
    """
    missing = [key for key in _COLUMNS if key not in dataset]
    if missing:
        raise ValueError(
            f"A D4RL dataset needs the arrays {sorted(_COLUMNS)}; this one lacks {missing} "
            f"(it has {sorted(dataset)})."
        )
    columns: dict[str, np.ndarray] = {}
    for key, column in _COLUMNS.items():
        array = np.asarray(dataset[key])
        if column == SampleBatch.DONES:
            array = array.astype(bool)
        elif column == SampleBatch.REWARDS or np.issubdtype(array.dtype, np.floating):
            array = array.astype(np.float32, copy=False)
        columns[column] = array
    lengths = {key: len(columns[column]) for key, column in _COLUMNS.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"The arrays of a D4RL dataset differ in length: {lengths}.")
    dones = columns[SampleBatch.DONES]
    columns[SampleBatch.TERMINATEDS] = dones.copy()
    columns[SampleBatch.TRUNCATEDS] = np.zeros(len(dones), dtype=bool)
    columns[SampleBatch.EPS_ID], columns[SampleBatch.T] = _episodes(columns)
    return SampleBatch(columns)


def _episodes(columns: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(``eps_id``, ``t``) of the transitions: a row continues the previous one's episode
    unless that one was terminal or its next observation is not this row's observation
    (`qlearning_dataset` drops the steps cut by a time limit, so that is where one ends)."""
    obs, new_obs = columns[SampleBatch.OBS], columns[SampleBatch.NEXT_OBS]
    n = len(obs)
    starts = np.ones(n, dtype=bool)
    if n > 1:
        same = (new_obs[:-1] == obs[1:]).reshape(n - 1, -1).all(axis=1)
        starts[1:] = columns[SampleBatch.DONES][:-1] | ~same
    eps_id = np.cumsum(starts).astype(np.int64) - 1
    first_row = np.flatnonzero(starts)
    t = np.arange(n, dtype=np.int64) - first_row[eps_id]
    return eps_id, t


class D4RLReader(InputReader):
    """The transitions of a D4RL dataset, one random row per `next()` (RLlib 1.13's).

    Each pass over the dataset visits every row once in a fresh random order (reproducible
    per worker when the config has a ``seed``). Rows go through the worker's offline-input
    rules as other readers' batches do (`corral.offline.adapt`: ``clip_actions``,
    ``normalize_actions``, ``postprocess_inputs``).

    Args:
        inputs: the D4RL env name (e.g. ``"hopper-medium-v2"``), as in
            ``input="d4rl.<env name>"``.
        ioctx: the worker's IO context.

    Attributes:
        env: the D4RL env (an old-gym env, as d4rl makes it: e.g. for
            `env.get_normalized_score`).
        dataset: all transitions as one `SampleBatch` (see `convert_to_batch`).
        observation_space, action_space: the env's spaces as Gymnasium spaces (for the
            ``observation_space`` / ``action_space`` of a trainer without an env).

    Raises:
        ImportError: `d4rl` is not installed (the message points to Minari).
        ValueError: `inputs` is no D4RL env, or its dataset is empty.
    """

    def __init__(self, inputs: str, ioctx: IOContext | None = None) -> None:
        d4rl = _import_d4rl()
        self.ioctx = ioctx or IOContext()
        self.env_name = inputs
        self.env = _make_env(inputs)
        self.observation_space: gym.Space = convert_space(self.env.observation_space)
        self.action_space: gym.Space = convert_space(self.env.action_space)
        self.dataset = convert_to_batch(d4rl.qlearning_dataset(self.env))
        if self.dataset.count < 1:
            raise ValueError(f"The D4RL dataset of {inputs!r} holds no transitions.")
        self._rng = rng_for(self.ioctx)
        self._order = np.empty(0, dtype=np.int64)

    def next(self) -> SampleBatchType:
        if len(self._order) == 0:  # a new pass over the rows, freshly shuffled
            self._order = self._rng.permutation(self.dataset.count)
        row, self._order = int(self._order[0]), self._order[1:]
        where = f"D4RL dataset {self.env_name!r}, row {row}"
        batch = adapt_batch(self.dataset.slice(row, row + 1), self.ioctx, where)
        return postprocess_if_needed(batch, self.ioctx)
