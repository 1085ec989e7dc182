"""`DatasetReader`: steps of a Ray Data dataset as offline input (``input="dataset"``).

RLlib 1.13's dataset input: ``input="dataset"`` with ``input_config={"format": "json" |
"parquet", "path": <files>}`` (or ``"loader_fn": fn() -> ray.data.Dataset``). Each row of
the dataset is one step; each `next()` returns the next ``train_batch_size / num_workers``
rows (RLlib's batch size; ``input_config["batch_size"]`` overrides it) as a
`SampleBatch`, cycling through the dataset forever. With remote workers, each reads its
own shard (``Dataset.split(num_workers)``, worker ``i`` the ``i``-th). Ray (``ray[data]``)
is needed; the dataset runs on the Ray cluster the process is connected to (a local one
is started otherwise). Parquet files written by `ParquetWriter` keep their row shapes
(``corral.shapes`` metadata); JSON datasets hold one step per line.

``input`` may also be a `ray.data.Dataset` itself (`is_ray_dataset`): it is read the same
way. By default the offline algorithms read it in their rollout workers: each batch goes
through `adapt_batch` (action clipping and normalisation) and `postprocess_inputs` (the
current policy's `postprocess_trajectory` over its episode fragments) into the algorithm's
replay buffer. With ``stream_to_learners`` (`corral.execution.learner_stream`) the learners
read it through `data_iterators` instead, preparing each batch the same way with
`prepare_streamed_rows`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from corral.offline.adapt import (
    adapt_actions,
    adapt_batch,
    postprocess_episodes,
    postprocess_if_needed,
)
from corral.offline.columns import batch_from_json_data, decode_column
from corral.offline.input_reader import InputReader, SampleBatchType
from corral.offline.io_context import IOContext
from corral.policy.sample_batch import SampleBatch, concat_samples


def _ray_data() -> Any:
    try:
        import ray.data
    except ImportError as err:
        raise ImportError(
            "input='dataset' reads Ray Data datasets and needs Ray: pip install 'corral[ray]'."
        ) from err
    return ray.data


def is_ray_dataset(value: Any) -> bool:
    """True for a `ray.data.Dataset` (or `MaterializedDataset`), without importing Ray."""
    return any(
        cls.__name__ == "Dataset" and cls.__module__.startswith("ray.data")
        for cls in type(value).__mro__
    )


def load_dataset(input_config: dict) -> Any:
    """The dataset `input_config` names (``loader_fn``, or ``format`` and ``path``)."""
    loader = input_config.get("loader_fn")
    if loader is not None:
        if not callable(loader):
            raise ValueError(f"input_config['loader_fn'] must be callable, got {loader!r}.")
        return loader()
    fmt, path = input_config.get("format"), input_config.get("path")
    if fmt not in ("json", "parquet") or not path:
        raise ValueError(
            "input='dataset' needs input_config={'format': 'json' or 'parquet', 'path': "
            f"<file, folder or list>}} or {{'loader_fn': fn}}, got {input_config!r}."
        )
    data = _ray_data()
    return data.read_parquet(path) if fmt == "parquet" else data.read_json(path)


def row_shapes(dataset: Any) -> dict[str, list[int]]:
    """The row shapes of a Parquet dataset written by `ParquetWriter` (`corral.shapes`)."""
    schema = dataset.schema()
    base = getattr(schema, "base_schema", schema)
    metadata = getattr(base, "metadata", None) or {}
    raw = metadata.get(b"corral.shapes")
    return json.loads(raw) if raw else {}


class DatasetReader(InputReader):
    """Fixed-size batches of a Ray Data dataset's steps (RLlib 1.13's `DatasetReader`).

    Args:
        ioctx: the worker's IO context (its ``input_config`` names the dataset, unless
            its ``input`` is a dataset itself).
        ds: the dataset to read; None reads ``input`` when it is a `ray.data.Dataset`,
            else loads the one ``input_config`` names.
    """

    def __init__(self, ioctx: IOContext | None = None, ds: Any = None) -> None:
        self.ioctx = ioctx or IOContext()
        config, input_config = self.ioctx.config, self.ioctx.input_config
        if ds is None and is_ray_dataset(config.get("input")):
            ds = config["input"]
        dataset = ds if ds is not None else load_dataset(input_config)
        num_workers = int(config.get("num_workers") or 0)
        index = self.ioctx.worker_index
        if num_workers > 0 and index > 0:
            dataset = dataset.split(num_workers, equal=True)[index - 1]
        size = input_config.get("batch_size") or config.get("train_batch_size") or 1
        self.batch_size = max(1, math.ceil(int(size) / max(1, num_workers)))
        self.dataset = dataset
        self._shapes = row_shapes(dataset)
        self._batches: Iterator[dict[str, np.ndarray]] | None = None

    def next(self) -> SampleBatchType:
        for _ in range(2):  # at the end of a pass, start the next one
            if self._batches is None:
                self._batches = iter(
                    self.dataset.iter_batches(batch_size=self.batch_size, batch_format="numpy")
                )
            columns = next(self._batches, None)
            if columns is not None:
                batch: SampleBatchType = dataset_rows(columns, self._shapes)
                batch = adapt_batch(batch, self.ioctx, "Ray dataset")
                return postprocess_if_needed(batch, self.ioctx)
            self._batches = None
        raise ValueError("The Ray dataset of input='dataset' holds no rows.")

    def close(self) -> None:
        """Ends the pass in progress (Ray Data's batch generator), while Ray is up."""
        close = getattr(self._batches, "close", None)  # a generator (Ray Data's) has one
        if close is not None:
            close()
        self._batches = None


def dataset_rows(columns: Mapping[str, Any], shapes: Mapping[str, list[int]]) -> SampleBatch:
    """A `SampleBatch` of one batch of a dataset's rows (Ray Data numpy columns): list
    columns stacked, Parquet columns given their row shapes (`corral.shapes`), encoded
    columns (JSON) decoded, float64 as float32."""
    if "type" in columns:
        return _record_rows(columns)
    out: dict[str, Any] = {}
    for name, values in columns.items():
        arr = np.asarray(values)
        if arr.dtype == object and arr.size and isinstance(arr.flat[0], np.ndarray):
            arr = np.stack(list(arr))  # list columns come as an array of row arrays
        if name in shapes:
            arr = arr.reshape(len(arr), *shapes[name])
        elif arr.dtype == object:
            out[name] = decode_column(name, arr.tolist(), "Ray dataset")
            continue
        out[name] = arr.astype(np.float32) if arr.dtype == np.float64 else arr
    return SampleBatch(out)


def _plain_value(value: Any) -> Any:
    """A Ray Data numpy value (nested object arrays) as plain Python data."""
    if isinstance(value, np.ndarray):
        return [_plain_value(v) for v in value] if value.dtype == object else value.tolist()
    if isinstance(value, list | tuple):
        return [_plain_value(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _record_rows(columns: Mapping[str, Any]) -> SampleBatch:
    """Rows that are RLlib JSON records (a ``type`` column: `DatasetWriter`'s one-step
    records, or RLlib 1.13's whole-batch ones), decoded and concatenated."""
    n = len(columns["type"])
    batches = []
    for i in range(n):
        record = {k: _plain_value(v[i]) for k, v in columns.items() if v[i] is not None}
        batch = batch_from_json_data(record, f"Ray dataset row {i}")
        if not isinstance(batch, SampleBatch):
            raise ValueError(
                "input='dataset' reads single-agent steps; the dataset holds a "
                f"{type(batch).__name__} record."
            )
        batches.append(batch)
    return concat_samples(batches) if len(batches) > 1 else batches[0]


# The config keys `prepare_streamed_rows` reads (what the learners need of the config).
STREAM_CONFIG_KEYS = (
    "clip_actions",
    "normalize_actions",
    "actions_in_input_normalized",
    "postprocess_inputs",
)


def prepare_streamed_rows(
    policy: Any,
    columns: Mapping[str, Any],
    *,
    config: Mapping[str, Any],
    shapes: Mapping[str, list[int]],
    keep: Sequence[str] | None = None,
    require: Sequence[str] = (),
) -> SampleBatch:
    """A batch of dataset rows streamed to a learner (`data_iterators`), made what a
    rollout worker's `DatasetReader` would have handed over: decoded (`dataset_rows`),
    actions clipped / normalised (`adapt_actions`), and with ``postprocess_inputs`` each
    episode fragment through `policy`'s `postprocess_trajectory` (the reading learner's
    policy, with the weights it trains). `keep`: the columns to keep, those present (the
    loss's); `require`: the columns that must be there.

    Bind everything but `policy` and `columns` (`functools.partial`) and pass it as
    `LearnerGroup.update(prepare_rows=...)`; `config` needs only `STREAM_CONFIG_KEYS`.
    """
    batch = adapt_actions(dataset_rows(columns, shapes), policy, config)
    if config.get("postprocess_inputs"):
        batch = postprocess_episodes(batch, policy)
    missing = sorted(set(require) - set(batch))
    if missing:
        raise ValueError(
            f"The streamed dataset rows lack columns {missing} after preparation (they hold "
            f"{sorted(batch)}): the loss needs {list(require)}."
        )
    if keep is not None:
        batch = SampleBatch({k: batch[k] for k in keep if k in batch})
    return batch


def check_stream_input(config: Mapping[str, Any]) -> None:
    """Raises unless ``input`` can be streamed to the learners (a Ray Data dataset, or
    ``"dataset"`` with its ``input_config``); loads nothing."""
    if not (is_ray_dataset(config.get("input")) or config.get("input") == "dataset"):
        raise ValueError(
            "stream_to_learners streams a Ray Data dataset: `input` must be a "
            f"ray.data.Dataset or 'dataset' (with input_config), got {config.get('input')!r}."
        )


def stream_dataset(config: Mapping[str, Any]) -> Any:
    """The Ray Data dataset an offline trainer streams to its learners: ``input`` itself,
    or the one ``input="dataset"``'s ``input_config`` names."""
    check_stream_input(config)
    if is_ray_dataset(config.get("input")):
        return config["input"]
    return load_dataset(config.get("input_config") or {})


# RLlib 1.13's `rllib.offline.dataset_reader` names.
# CPUs each read task of `get_dataset_and_shards` asks for (``num_cpus_per_read_task``).
DEFAULT_NUM_CPUS_PER_TASK = 0.5


def _read_settings(config: Mapping[str, Any]) -> tuple[int, float]:
    input_config = config.get("input_config") or {}
    parallelism = int(input_config.get("parallelism", config.get("num_workers") or 1) or 1)
    cpus = float(input_config.get("num_cpus_per_read_task", DEFAULT_NUM_CPUS_PER_TASK))
    return max(1, parallelism), cpus


def get_resource_bundles(config: Mapping[str, Any]) -> list[dict[str, float]]:
    """The Ray resource bundles the dataset's read tasks take: one ``{"CPU":
    num_cpus_per_read_task}`` per read task (``input_config["parallelism"]``, by default
    ``num_workers`` or 1), RLlib 1.13's rule."""
    parallelism, cpus = _read_settings(config)
    return [{"CPU": cpus} for _ in range(parallelism)]


def get_dataset_and_shards(
    config: Mapping[str, Any], num_workers: int = 0, local_worker: bool = True
) -> tuple[Any, list[Any]]:
    """The dataset ``input="dataset"`` names, and its shard for each rollout worker.

    Returns `(dataset, shards)`: with no remote workers ``[dataset]`` (the local worker
    reads all of it), else ``[None] + num_workers`` equal shards, the ``i``-th for remote
    worker ``i`` (the local worker reads none; RLlib 1.13's rule). The read runs with
    ``input_config["parallelism"]`` tasks of ``num_cpus_per_read_task`` CPUs each.
    """
    if not (config.get("input") == "dataset" or is_ray_dataset(config.get("input"))):
        raise ValueError(
            "get_dataset_and_shards needs input='dataset' (with input_config) or a "
            f"ray.data.Dataset as input, got {config.get('input')!r}."
        )
    input_config = dict(config.get("input_config") or {})
    if is_ray_dataset(config.get("input")):
        dataset = config["input"]
    elif input_config.get("loader_fn") is not None:
        dataset = load_dataset(input_config)
    else:
        fmt, path = input_config.get("format"), input_config.get("path")
        if fmt not in ("json", "parquet") or not path:
            load_dataset(input_config)  # raises its error naming the bad input_config
        parallelism, cpus = _read_settings(config)
        data = _ray_data()
        read = data.read_parquet if fmt == "parquet" else data.read_json
        dataset = read(path, override_num_blocks=parallelism, num_cpus=cpus)
    if local_worker and num_workers == 0:
        return dataset, [dataset]
    return dataset, [None, *dataset.split(num_workers, equal=True)]
