"""Offline data: writing sampled experiences and training from recorded ones.

RLlib 1.13's `ray.rllib.offline`: `InputReader`/`OutputWriter` and their JSON forms
(`JsonReader`, `JsonWriter`, RLlib's own files included), `ShuffledInput`, `MixedInput`
and `IOContext`; plus Parquet (`ParquetReader`, `ParquetWriter`), Minari datasets
(`MinariReader`), RLlib's D4RL reader (`D4RLReader`, needs the `d4rl` package) and Ray Data
datasets (`DatasetReader`, `DatasetWriter`). A rollout worker
builds its reader and writer from the config keys ``input``, ``output`` and their companions (see
`corral.offline.inputs`).
"""

from corral.offline.d4rl_reader import D4RLReader
from corral.offline.dataset_reader import DatasetReader, get_dataset_and_shards
from corral.offline.dataset_writer import DatasetWriter
from corral.offline.input_reader import InputReader, SamplerInput
from corral.offline.io_context import IOContext
from corral.offline.json_reader import JsonReader
from corral.offline.json_writer import JsonWriter
from corral.offline.minari_reader import MinariReader
from corral.offline.mixed_input import MixedInput
from corral.offline.output_writer import NoopOutput, OutputWriter
from corral.offline.parquet import ParquetReader, ParquetWriter
from corral.offline.resource import get_offline_io_resource_bundles
from corral.offline.shuffled_input import ShuffledInput

__all__ = [
    "D4RLReader",
    "DatasetReader",
    "DatasetWriter",
    "IOContext",
    "InputReader",
    "JsonReader",
    "JsonWriter",
    "MinariReader",
    "MixedInput",
    "NoopOutput",
    "OutputWriter",
    "ParquetReader",
    "ParquetWriter",
    "SamplerInput",
    "ShuffledInput",
    "get_dataset_and_shards",
    "get_offline_io_resource_bundles",
]
