"""``tune.track``: Ray Tune's first function API, deprecated in Ray 1.x (Ray Tune 1.13 still
lists ``track`` in ``ray.tune.__all__``): its ``log`` raises ``DeprecationWarning``;
report with ``tune.report(...)``."""

from __future__ import annotations

from typing import Any

__all__ = ["log"]


def log(**metrics: Any) -> None:
    """Deprecated: raises ``DeprecationWarning``; use ``tune.report(**metrics)``.

    Raises:
        DeprecationWarning: always.
    """
    raise DeprecationWarning("tune.track.log is deprecated: use tune.report(**metrics) instead.")
