"""NumPy 1.x names that NumPy 2.0 removed, for RLlib 1.x-era code.

RLlib 1.13's users wrote against NumPy 1.x (`np.product(space.shape)` in many custom
models, `np.bool8` in gym 0.23). NumPy 2.0 dropped these aliases. `install()` puts back
the ones missing, each bound to the function or type it was an alias of, so such code
runs unchanged. It only adds names NumPy lacks; nothing NumPy defines is replaced.

corral installs them when RLlib 1.x-style code is in play: when `corral.utils.annotations`
(imported by nearly every RLlib 1.x model and env module) is imported, and when an old
gym env or space is converted.
"""

from __future__ import annotations

import numpy as np

# Removed name -> the NumPy 2 object it was an alias of.
_ALIASES = {
    "product": "prod",
    "cumproduct": "cumprod",
    "sometrue": "any",
    "alltrue": "all",
    "round_": "round",
    "bool8": "bool_",
    "float_": "float64",
    "complex_": "complex128",
    "unicode_": "str_",
    "string_": "bytes_",
    "NaN": "nan",
    "NAN": "nan",
    "Inf": "inf",
    "Infinity": "inf",
    "infty": "inf",
    "PINF": "inf",
}


def install() -> list[str]:
    """Adds the missing aliases to `numpy`; returns the names added (none on NumPy 1.x)."""
    added = []
    for old, new in _ALIASES.items():
        if not hasattr(np, old) and hasattr(np, new):
            setattr(np, old, getattr(np, new))
            added.append(old)
    if not hasattr(np, "NINF"):
        np.NINF = -np.inf
        added.append("NINF")
    return added
