"""Building a rollout worker's input reader and output writer from its config.

RLlib 1.13's rules (``input``, ``output`` and their companion keys are documented in
`COMMON_CONFIG`), plus corral's sources: Parquet files (by their ``.parquet`` suffix)
Minari datasets (``"minari://<dataset id>"``), D4RL datasets (``"d4rl.<env name>"``, RLlib
1.13's) and Ray Data datasets (``"dataset"``).
"""

from __future__ import annotations

import os
import re
from typing import Any

from corral.offline.dataset_reader import DatasetReader, is_ray_dataset
from corral.offline.input_reader import InputReader, SamplerInput
from corral.offline.io_context import IOContext
from corral.offline.json_reader import JsonReader
from corral.offline.json_writer import JsonWriter
from corral.offline.output_writer import NoopOutput, OutputWriter
from corral.offline.shuffled_input import ShuffledInput

# "minari://<dataset id>" (the short "minari:<dataset id>" works too).
MINARI_PREFIXES = ("minari://", "minari:")
# "d4rl.<env name>": RLlib 1.13's D4RL input (`corral.offline.d4rl_reader`).
D4RL_PREFIX = "d4rl."

# A dotted Python name ("package.module.Class"): RLlib 1.13 imported such an `input`.
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")
# Last parts that make a dotted name a file name instead ("out.json").
_FILE_SUFFIXES = ("json", "zip", "parquet", "gz", "lz4")


def _refuse_class_path(source: str) -> None:
    """Raises for an ``input`` naming a class by its dotted path that is no file or folder.

    RLlib 1.13 imported such a class and built it with the IOContext; corral imports
    nothing a config names (a config may come from a checkpoint's or trial's files), so it
    says what to pass instead rather than reporting that no files match.
    """
    if (
        not _DOTTED_NAME.fullmatch(source)
        or source.rsplit(".", 1)[1].lower() in _FILE_SUFFIXES
        or os.path.exists(os.path.expanduser(source))
    ):
        return
    raise ValueError(
        f"input={source!r} is no file or folder and looks like a class path. corral does not "
        "import classes or modules named in a config (RLlib 1.13 imported it and built it "
        'with the IOContext). Pass the class itself (`"input": MyReader`, called with the '
        "IOContext), a function taking the IOContext and returning an InputReader, or a name "
        "registered with `corral.tune.register_input(name, creator)`."
    )


def _registered_input(name: str) -> Any:
    from corral.tune.registry import registry_contains_input, registry_get_input

    return registry_get_input(name) if registry_contains_input(name) else None


def _checked(reader: Any, source: Any) -> InputReader:
    if not callable(getattr(reader, "next", None)):
        raise ValueError(
            f"The input {source!r} returned {reader!r}, which has no next() method; an input "
            "creator must return an InputReader."
        )
    return reader


def _is_parquet(source: Any) -> bool:
    entries = source if isinstance(source, list | tuple) else [source]
    for entry in entries:
        path = os.path.expanduser(os.fspath(entry))
        if path.endswith(".parquet"):
            return True
        if os.path.isdir(path):
            names = os.listdir(path)
            return any(n.endswith(".parquet") for n in names) and not any(
                n.endswith((".json", ".zip")) for n in names
            )
    return False


def input_reader_for(source: Any, ioctx: IOContext) -> InputReader:
    """The reader of one input source (anything ``config["input"]`` may be but a dict)."""
    if is_ray_dataset(source):
        return DatasetReader(ioctx, ds=source)
    if callable(source):
        return _checked(source(ioctx), source)
    if isinstance(source, dict):
        from corral.offline.mixed_input import MixedInput

        return MixedInput(source, ioctx)
    if isinstance(source, str):
        if source == "sampler":
            return ioctx.default_sampler_input()
        creator = _registered_input(source)
        if creator is not None:
            return _checked(creator(ioctx), source)
        for prefix in MINARI_PREFIXES:
            if source.startswith(prefix):
                from corral.offline.minari_reader import MinariReader

                return MinariReader(source[len(prefix) :], ioctx)
        if source == "dataset":
            return DatasetReader(ioctx)
        if source.startswith(D4RL_PREFIX):
            from corral.offline.d4rl_reader import D4RLReader

            return D4RLReader(source[len(D4RL_PREFIX) :], ioctx)
        _refuse_class_path(source)
    if isinstance(source, str | os.PathLike | list | tuple):
        if _is_parquet(source):
            from corral.offline.parquet import ParquetReader

            return ParquetReader(source, ioctx)
        return JsonReader(source, ioctx)
    raise ValueError(
        f"input={source!r}: expected 'sampler', a folder/glob/file or list of files, a dict "
        "{source: probability}, a callable taking an IOContext, a name registered with "
        "register_input, 'dataset' (Ray Data) or a ray.data.Dataset, "
        "'minari://<dataset id>' or 'd4rl.<env name>'."
    )


def make_input_reader(ioctx: IOContext) -> InputReader | None:
    """The worker's reader for ``config["input"]``; None for "sampler" without an env.

    Files and mixed inputs go through a `ShuffledInput` of ``shuffle_buffer_size``
    (RLlib's rule; a callable or registered input is used as it returns).
    """
    source = ioctx.config.get("input", "sampler")
    if source == "sampler":
        worker = ioctx.worker
        return SamplerInput(worker) if getattr(worker, "sampler", None) is not None else None
    reader = input_reader_for(source, ioctx)
    if callable(source) or (isinstance(source, str) and _registered_input(source) is not None):
        return reader
    seed = ioctx.config.get("seed")
    shuffle_seed = None if seed is None else int(seed) * 1000 + ioctx.worker_index + 7
    return ShuffledInput(reader, int(ioctx.config.get("shuffle_buffer_size") or 0), shuffle_seed)


def make_output_writer(ioctx: IOContext) -> OutputWriter:
    """The worker's writer for ``config["output"]``.

    None writes nothing; "logdir" writes JSON into the trainer's log folder; "dataset"
    writes through Ray Data (`DatasetWriter`, ``output_config`` names the files); a folder
    writes JSON there (``output_config={"format": "parquet"}`` writes Parquet instead);
    a callable is called with the `IOContext` and returns the writer.
    """
    config = ioctx.config
    output = config.get("output")
    if output is None:
        return NoopOutput()
    if callable(output):
        writer = output(ioctx)
        if not callable(getattr(writer, "write", None)):
            raise ValueError(
                f"output={output!r} returned {writer!r}, which has no write() method; an "
                "output creator must return an OutputWriter."
            )
        return writer
    if not isinstance(output, str):
        raise ValueError(
            f"output={output!r}: expected None, 'logdir', a folder, or a callable taking an "
            "IOContext and returning an OutputWriter."
        )
    if output == "dataset":
        from corral.offline.dataset_writer import DatasetWriter

        return DatasetWriter(ioctx, compress_columns=config.get("output_compress_columns"))
    path = ioctx.log_dir if output == "logdir" else output
    max_size = int(config.get("output_max_file_size") or 64 * 1024 * 1024)
    fmt = ioctx.output_config.get("format", "json")
    if fmt == "parquet":
        from corral.offline.parquet import ParquetWriter

        return ParquetWriter(path, ioctx, max_file_size=max_size)
    if fmt != "json":
        raise ValueError(f"output_config['format']={fmt!r}: expected 'json' or 'parquet'.")
    compress = config.get("output_compress_columns", ["obs", "new_obs"])
    return JsonWriter(path, ioctx, max_file_size=max_size, compress_columns=compress)


def make_worker_io(worker: Any) -> tuple[IOContext, InputReader | None, OutputWriter]:
    """The `IOContext`, input reader and output writer of a `RolloutWorker`."""
    ioctx = IOContext(worker.log_dir, worker.config, worker.worker_index, worker)
    return ioctx, make_input_reader(ioctx), make_output_writer(ioctx)


def read_fragment(worker: Any) -> Any:
    """One `sample()` of a worker with offline input (RLlib 1.13's rule): batches from
    its reader until ``rollout_fragment_length`` steps, at most one per env in
    ``truncate_episodes`` mode (so one `next()` per call with one env)."""
    from corral.policy.sample_batch import concat_samples

    config = worker.config
    if config.get("in_evaluation") and not isinstance(worker.input_reader, SamplerInput):
        # Evaluation counts finished env episodes; offline batches bring none, so the
        # evaluation loop would wait forever.
        raise ValueError(
            f"An evaluation worker reads input={config.get('input')!r}, but evaluation needs "
            "episodes from an env: set evaluation_config={'input': 'sampler'} (and "
            "evaluation_config['env'] if the trainer has no env)."
        )
    by_agent = (config.get("multiagent") or {}).get("count_steps_by") == "agent_steps"
    limit = int(config.get("rollout_fragment_length") or 1)
    max_batches = (
        int(config.get("num_envs_per_worker") or 1)
        if config.get("batch_mode", "truncate_episodes") == "truncate_episodes"
        else float("inf")
    )
    batches = [worker.input_reader.next()]
    steps = batches[0].agent_steps() if by_agent else batches[0].count
    while steps < limit and len(batches) < max_batches:
        batches.append(worker.input_reader.next())
        steps += batches[-1].agent_steps() if by_agent else batches[-1].count
    return concat_samples(batches) if len(batches) > 1 else batches[0]
