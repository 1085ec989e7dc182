"""`MixedInput`: draws each batch from one of several inputs, with given probabilities."""

from __future__ import annotations

import math
from typing import Any

from corral.offline.input_reader import InputReader, SampleBatchType
from corral.offline.io_context import IOContext
from corral.offline.json_reader import rng_for


class MixedInput(InputReader):
    """Each `next()` picks a source at random by its probability (RLlib 1.13's `MixedInput`).

    Args:
        dist: source -> probability; the probabilities sum to 1. A source is anything
            ``config["input"]`` may be except a dict: ``"sampler"``, a folder, glob or
            file, a callable taking the `IOContext`, or a registered input name.
        ioctx: the worker's IO context.
    """

    def __init__(self, dist: dict[Any, float], ioctx: IOContext) -> None:
        from corral.offline.inputs import input_reader_for

        if not isinstance(dist, dict) or not dist:
            raise ValueError(
                f"A mixed input is a non-empty dict source -> probability, got {dist!r}."
            )
        for source, p in dist.items():
            if isinstance(source, dict) or not isinstance(p, int | float) or p < 0:
                raise ValueError(
                    f"Mixed input {dist!r}: source {source!r} has probability {p!r}; each must "
                    "be a number >= 0 (and a source may not itself be a dict)."
                )
        total = sum(dist.values())
        if not math.isclose(total, 1.0, rel_tol=0, abs_tol=1e-6):
            raise ValueError(
                f"The probabilities of a mixed input must sum to 1.0, got {total}: {dist!r}."
            )
        self.sources = list(dist)
        self.choices = [input_reader_for(source, ioctx) for source in self.sources]
        self.p = [float(dist[s]) / total for s in self.sources]
        self._rng = rng_for(ioctx)

    def next(self) -> SampleBatchType:
        index = int(self._rng.choice(len(self.choices), p=self.p))
        return self.choices[index].next()
