"""A restricted unpickler for the compressed columns of RLlib's own JSON files.

RLlib (1.x and 2.x) wrote each compressed column as base64 of an LZ4 frame of a
(cloud)pickle of the column's numpy array. The stock unpickler would run whatever
callable such a payload names, so a JSON file from elsewhere could execute code on
load. This unpickler resolves only the few globals that rebuild numpy arrays, dtypes
and scalars (and Python's plain containers, which pickle builds without globals);
anything else is refused with an error naming where it was found and what it asked
for. Out-of-band buffers and persistent ids are refused too.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

import numpy as np

try:  # NumPy 2 moved the array internals to numpy._core; pickles name either path.
    from numpy._core import multiarray as _multiarray
    from numpy._core import numeric as _numeric
except ImportError:  # pragma: no cover - NumPy 1.x
    from numpy.core import multiarray as _multiarray  # type: ignore[no-redef]
    from numpy.core import numeric as _numeric  # type: ignore[no-redef]


class RefusedPickleError(ValueError):
    """A pickled payload asked for a global this unpickler does not allow."""


def _allowed_globals() -> dict[tuple[str, str], Any]:
    # Each entry rebuilds data only: none of these callables can import, open or run
    # anything named by the payload.
    table: dict[tuple[str, str], Any] = {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        # Protocol 2 pickles raw bytes as _codecs.encode(latin-1 str).
        ("_codecs", "encode"): _latin1_encode,
        ("builtins", "set"): set,
        ("builtins", "frozenset"): frozenset,
        ("builtins", "bytearray"): bytearray,
        ("builtins", "complex"): complex,
        ("collections", "OrderedDict"): dict,
    }
    # Pickles of protocol < 3 name Python 2's module for the builtins.
    for (module, name), obj in list(table.items()):
        if module == "builtins":
            table[("__builtin__", name)] = obj
    for module in ("numpy.core", "numpy._core"):
        table[(f"{module}.multiarray", "_reconstruct")] = _multiarray._reconstruct
        table[(f"{module}.multiarray", "scalar")] = _multiarray.scalar
        table[(f"{module}.numeric", "_frombuffer")] = _numeric._frombuffer  # type: ignore[attr-defined]
    return table


def _latin1_encode(text: str, encoding: str = "latin1", errors: str = "strict") -> bytes:
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise RefusedPickleError(f"_codecs.encode({type(text).__name__}, {encoding!r}) refused")
    return text.encode("latin1", errors)


_ALLOWED = _allowed_globals()


class _RestrictedUnpickler(pickle.Unpickler):
    def __init__(self, data: bytes, where: str) -> None:
        super().__init__(io.BytesIO(data))
        self._where = where

    def find_class(self, module: str, name: str) -> Any:
        found = _ALLOWED.get((module, name))
        if found is None:
            raise RefusedPickleError(
                f"{self._where}: refused to unpickle `{module}.{name}`: compressed RLlib "
                "columns may only hold numpy arrays and plain containers (corral never runs "
                "the stock unpickler on data files)."
            )
        return found

    def persistent_load(self, pid: Any) -> Any:
        raise RefusedPickleError(f"{self._where}: refused a pickle persistent id ({pid!r}).")


def restricted_loads(data: bytes, where: str) -> Any:
    """Unpickles `data`, allowing only numpy arrays, dtypes, scalars and plain containers.

    Args:
        data: the pickle bytes.
        where: names the source in errors (e.g. ``"file.json, line 3, column 'obs'"``).

    Raises:
        RefusedPickleError: the payload names any other global, or uses out-of-band
            buffers or persistent ids.
    """
    try:
        return _RestrictedUnpickler(data, where).load()
    except RefusedPickleError:
        raise
    except pickle.UnpicklingError as err:
        raise RefusedPickleError(f"{where}: not a readable pickle: {err}") from err
