"""What every ``corral`` subcommand shares: exit codes, ``UsageError``, argument types,
building a trainer with its mistakes reported in one line.

Only the standard library is imported at module level (``corral --help`` must answer
at once); torch and the trainers load inside the functions.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import traceback
from collections.abc import Callable, Iterator
from typing import Any

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """A mistake on the command line or in its files; reported without a traceback."""


def json_object(text: str) -> dict:
    """argparse type: a JSON object (dict); anything else is a usage error."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"invalid JSON ({e}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(
            f"expected a JSON object such as '{{\"lr\": 0.001}}', got {text!r}"
        )
    return value


def positive_int(text: str) -> int:
    """argparse type: an int >= 1."""
    value = _int_arg(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an int >= 0."""
    value = _int_arg(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def _int_arg(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


@contextlib.contextmanager
def checkpoint_errors_as_usage() -> Iterator[None]:
    """Turns a ``CheckpointError`` (its message names the file) into a one-line ``UsageError``.

    A checkpoint the user named that is missing, not one, or damaged is a mistake in
    the command line, not in corral.
    """
    from corral.utils.error import CheckpointError

    try:
        yield
    except CheckpointError as e:
        raise UsageError(str(e)) from None


def find_checkpoint_dir(path: str) -> str:
    """The checkpoint folder of ``path`` (it or an ancestor), or a ``UsageError`` saying why not."""
    from corral.utils import checkpoints

    with checkpoint_errors_as_usage():
        return checkpoints.find_checkpoint_dir(
            path, expected="a checkpoint_<iteration> folder written by `corral train`"
        )


def get_trainer_class(name: str) -> Any:
    """The trainer class of ``name``; unknown names are a usage error listing the known ones."""
    from corral.agents.registry import get_trainer_class as lookup

    try:
        return lookup(name)
    except (ValueError, NotImplementedError) as e:
        raise UsageError(str(e)) from None


def build_trainer(
    trainer_class: Any,
    env: Any,
    config: dict,
    logger_creator: Callable[[dict], Any] | None = None,
    verbose: int = 0,
) -> Any:
    """Constructs the trainer; config and env mistakes become a ``UsageError``.

    With ``-vv`` the traceback is printed as well, for when the mistake turns
    out to be corral's.
    """
    return constructed(
        trainer_class,
        lambda: trainer_class(config=config, env=env, logger_creator=logger_creator),
        verbose,
    )


def constructed(trainer_class: Any, construct: Callable[[], Any], verbose: int = 0) -> Any:
    """``construct()``, its config and env mistakes reported as a ``UsageError``.

    A ``CheckpointError`` passes through unchanged (its message names the file).
    """
    from gymnasium.error import Error as GymnasiumError

    from corral.utils.error import CheckpointError, EnvError, UnsupportedSpaceException

    user_errors = (
        ValueError,
        TypeError,
        KeyError,
        NotImplementedError,
        EnvError,
        UnsupportedSpaceException,
        GymnasiumError,
    )
    try:
        return construct()
    except CheckpointError:
        raise
    except user_errors as e:
        if verbose > 1:
            traceback.print_exc()
        raise UsageError(f"cannot build the {trainer_class.__name__}: {_describe(e)}") from None


def _describe(error: BaseException) -> str:
    text = str(error)
    if isinstance(error, KeyError) and error.args:
        text = f"missing key {error.args[0]!r}"
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
