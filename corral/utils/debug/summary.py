"""``summarize``: a compact pretty-print of nested results, arrays and batches."""

from __future__ import annotations

import pprint
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["summarize"]

_printer = pprint.PrettyPrinter(indent=2, width=60)


class _StringValue:
    """Prints as its text without quotes."""

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return self.value


def summarize(obj: Any) -> str:
    """A pretty-formatted string of `obj`: arrays shown as shape/dtype/min/max/mean,
    SampleBatch and MultiAgentBatch by their columns."""
    return _printer.pformat(_summarize(obj))


def _summarize(obj: Any) -> Any:
    from corral.policy.sample_batch import MultiAgentBatch, SampleBatch

    if isinstance(obj, MultiAgentBatch):
        return {
            "type": "MultiAgentBatch",
            "policy_batches": _summarize(obj.policy_batches),
            "count": obj.count,
        }
    if isinstance(obj, SampleBatch):
        return {"type": "SampleBatch", "data": {k: _summarize(v) for k, v in obj.items()}}
    if isinstance(obj, Mapping):
        return {k: _summarize(v) for k, v in obj.items()}
    if hasattr(obj, "_asdict"):
        return {"type": type(obj).__name__, "data": _summarize(obj._asdict())}
    if isinstance(obj, list):
        return [_summarize(x) for x in obj]
    if isinstance(obj, tuple):
        return tuple(_summarize(x) for x in obj)
    if isinstance(obj, np.ndarray):
        if obj.size == 0:
            return _StringValue(f"np.ndarray({obj.shape}, dtype={obj.dtype})")
        if obj.dtype == object or obj.dtype.type is np.str_:
            return _StringValue(
                f"np.ndarray({obj.shape}, dtype={obj.dtype}, head={_summarize(obj[0])})"
            )
        return _StringValue(
            f"np.ndarray({obj.shape}, dtype={obj.dtype}, min={round(float(np.min(obj)), 3)}, "
            f"max={round(float(np.max(obj)), 3)}, mean={round(float(np.mean(obj)), 3)})"
        )
    return obj
