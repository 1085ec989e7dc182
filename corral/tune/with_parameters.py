"""``tune.with_parameters``: hand extra objects (a data set, a model) to a trainable
besides its config, as Ray Tune 1.13's.

Ray Tune puts them in its object store so that they are not pickled into every trial;
corral's trials run in this process, so the wrapper just keeps a reference and passes
it on: ``train_fn(config, **kwargs)`` for a function trainable,
``setup(config, **kwargs)`` for a ``Trainable`` class.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from corral.tune.trainable import Trainable


def with_parameters(trainable: type[Trainable] | Callable[..., Any], **kwargs: Any) -> Any:
    """``trainable`` with ``kwargs`` given to it on top of the config.

    Args:
        trainable: a function trainable ``train_fn(config, [checkpoint_dir], **kwargs)``
            or a ``Trainable`` subclass whose ``setup(config, **kwargs)`` takes them.
        **kwargs: the objects to pass (by reference: every trial gets the same ones).

    Returns:
        A function (keeping ``checkpoint_dir`` when ``train_fn`` has it) or a subclass of
        ``trainable``, for ``tune.run``.

    Raises:
        ValueError: ``trainable`` is neither, or a class whose ``setup`` does not take
            the names in ``kwargs``.
    """
    if isinstance(trainable, type) and issubclass(trainable, Trainable):
        return _class_with_parameters(trainable, kwargs)
    if callable(trainable) and not isinstance(trainable, type):
        return _function_with_parameters(trainable, kwargs)
    raise ValueError(
        f"tune.with_parameters() takes a function trainable or a Trainable subclass, got "
        f"{trainable!r}"
    )


def _function_with_parameters(train_fn: Callable[..., Any], kwargs: dict) -> Callable[..., Any]:
    takes_checkpoint_dir = "checkpoint_dir" in inspect.signature(train_fn).parameters
    if takes_checkpoint_dir:

        def inner(config: dict, checkpoint_dir: str | None = None) -> Any:
            return train_fn(config, checkpoint_dir=checkpoint_dir, **kwargs)

    else:

        def inner(config: dict) -> Any:  # type: ignore[misc]
            return train_fn(config, **kwargs)

    functools.update_wrapper(inner, train_fn, updated=())
    del inner.__wrapped__  # (its own signature, not train_fn's, is what counts)
    return inner


def _class_with_parameters(cls: type[Trainable], kwargs: dict) -> type[Trainable]:
    setup = inspect.signature(cls.setup)
    takes_any = any(p.kind is p.VAR_KEYWORD for p in setup.parameters.values())
    missing = [name for name in kwargs if not takes_any and name not in setup.parameters]
    if missing:
        raise ValueError(
            f"tune.with_parameters({cls.__name__}, ...): {cls.__name__}.setup takes no "
            f"{missing}; define setup(self, config, {', '.join(missing)})"
        )

    def setup_with_parameters(self: Trainable, config: dict) -> None:
        cls.setup(self, config, **kwargs)  # type: ignore[call-arg]

    return type(
        cls.__name__,
        (cls,),
        {"setup": setup_with_parameters, "__module__": cls.__module__, "__doc__": cls.__doc__},
    )
