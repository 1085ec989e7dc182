"""Ray Tune's deprecated names, which raise ``DeprecationWarning`` when used.

``DurableTrainable`` and ``tune.durable`` (Ray Tune 1.13's stubs: a trainable synced its
checkpoints to the cloud; 1.13 made every trainable durable given an ``upload_dir``, which
corral, without cloud syncing, does not build), and ``tune.make_checkpoint_dir`` /
``tune.save_checkpoint`` (Ray Tune 1.x's stubs before 1.13, which still lists them in
``ray.tune.__all__``).
"""

from __future__ import annotations

from typing import Any

from corral.tune.trainable import Trainable

__all__ = ["DurableTrainable", "durable", "make_checkpoint_dir", "save_checkpoint"]


class DurableTrainable(Trainable):
    """Deprecated in Ray Tune 1.13: building one raises ``DeprecationWarning``; subclass
    ``Trainable`` instead."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise DeprecationWarning(
            "DeprecationWarning: The `DurableTrainable` class is deprecated (Ray Tune 1.13): "
            "inherit from `Trainable` instead (corral keeps checkpoints locally)."
        )


def durable(trainable: Any) -> Any:
    """Deprecated in Ray Tune 1.13: raises ``DeprecationWarning``; pass the trainable to
    ``tune.run`` as it is.

    Raises:
        DeprecationWarning: always.
    """
    raise DeprecationWarning(
        "DeprecationWarning: `tune.durable()` is deprecated (Ray Tune 1.13): remove the call "
        f"and pass {trainable!r} to tune.run as it is."
    )


def make_checkpoint_dir(step: Any = None) -> Any:
    """Deprecated (Ray Tune 1.x): raises ``DeprecationWarning``; use ``tune.checkpoint_dir``.

    Raises:
        DeprecationWarning: always.
    """
    raise DeprecationWarning(
        "Deprecated method. Use `with tune.checkpoint_dir(step=...) as path:` instead."
    )


def save_checkpoint(checkpoint: Any) -> Any:
    """Deprecated (Ray Tune 1.x): raises ``DeprecationWarning``; use ``tune.checkpoint_dir``.

    Raises:
        DeprecationWarning: always.
    """
    raise DeprecationWarning(
        "Deprecated method. Write the checkpoint inside "
        "`with tune.checkpoint_dir(step=...) as path:` instead."
    )
