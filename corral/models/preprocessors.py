"""Turning env observations into the flat float32 arrays models consume.

:func:`get_preprocessor` is RLlib's: it returns the preprocessor *class* for a space, built
as ``get_preprocessor(space)(space)``. :func:`preprocessor_for_space` gives the instance
corral's policies use.

Dict/Tuple observations become one row: the leaves in the space's order, discrete parts
one-hot (Gymnasium's ``flatten``). A ``Repeated`` space (a list of up to ``max_len``
elements) becomes RLlib's ``RepeatedValuesPreprocessor`` layout: the list length, then
``max_len`` slots of the element's flat size (unused slots zero). Models get the structure
back from :func:`restore_original_dimensions` (a ``Repeated`` part as ``RepeatedValues``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from corral.env.gym_compat import convert_space
from corral.utils.error import UnsupportedSpaceException
from corral.utils.spaces.repeated import Repeated

__all__ = [
    "ATARI_OBS_SHAPE",
    "ATARI_RAM_OBS_SHAPE",
    "OBS_VALIDATION_INTERVAL",
    "AtariRamPreprocessor",
    "DictFlatteningPreprocessor",
    "GenericPixelPreprocessor",
    "NoPreprocessor",
    "OneHotPreprocessor",
    "Preprocessor",
    "RepeatedValuesPreprocessor",
    "TupleFlatteningPreprocessor",
    "get_preprocessor",
    "legacy_patch_shapes",
    "preprocessor_for_space",
    "raw_observations",
    "restore_original_dimensions",
]

ATARI_OBS_SHAPE = (210, 160, 3)
ATARI_RAM_OBS_SHAPE = (128,)
# `check_shape` validates one observation in this many against the space.
OBS_VALIDATION_INTERVAL = 100


def _contains_repeated(space: gym.Space) -> bool:
    if isinstance(space, Repeated):
        return True
    if isinstance(space, gym.spaces.Dict):
        return any(_contains_repeated(s) for s in space.spaces.values())
    if isinstance(space, gym.spaces.Tuple):
        return any(_contains_repeated(s) for s in space.spaces)
    return False


def _flat_size(space: gym.Space) -> int:
    """Columns one observation of `space` takes in a flat row."""
    if isinstance(space, Repeated):
        return 1 + space.max_len * _flat_size(space.child_space)
    if isinstance(space, gym.spaces.Dict):
        return sum(_flat_size(s) for s in space.spaces.values())
    if isinstance(space, gym.spaces.Tuple):
        return sum(_flat_size(s) for s in space.spaces)
    return int(gym.spaces.flatdim(space))


def _write(space: gym.Space, observation: Any, out: np.ndarray, offset: int) -> int:
    """Writes `observation` flat into ``out[offset:]``; returns the offset after it."""
    if isinstance(space, Repeated):
        if not isinstance(observation, (list, tuple, np.ndarray)):
            raise ValueError(f"Input for {space} must be a list, got {observation!r}")
        if len(observation) > space.max_len:
            raise ValueError(f"Input {observation!r} exceeds max len of space {space.max_len}")
        child = _flat_size(space.child_space)
        out[offset] = len(observation)
        for i, element in enumerate(observation):
            _write(space.child_space, element, out, offset + 1 + i * child)
        return offset + 1 + space.max_len * child
    if isinstance(space, gym.spaces.Dict):
        for key, sub in space.spaces.items():
            offset = _write(sub, observation[key], out, offset)
        return offset
    if isinstance(space, gym.spaces.Tuple):
        for sub, part in zip(space.spaces, observation):
            offset = _write(sub, part, out, offset)
        return offset
    flat = gym.spaces.flatten(space, observation)
    out[offset : offset + len(flat)] = flat
    return offset + len(flat)


def legacy_patch_shapes(space: gym.Space) -> Any:
    """The space's shape (RLlib patched shapes onto old gym spaces here; Gymnasium's
    spaces all have one)."""
    return getattr(space, "shape", None)


class Preprocessor:
    """Maps one observation of `original_space` to a float32 array of `shape`.

    A user preprocessor (`model: {"custom_preprocessor": name}`, RLlib 1.13's deprecated
    API) subclasses this and overrides `_init_shape` (the output's shape) and `transform`
    (one observation -> an array of that shape); its `observation_space` (a Box of that
    shape) is what the model is built for.

    Args:
        obs_space: the env's observation space (kept as `original_space`).
        options: the model config (RLlib's signature; unused by the flattening ones).
    """

    def __init__(self, obs_space: gym.Space, options: dict | None = None) -> None:
        original_space = convert_space(obs_space)  # (an old gym space: its Gymnasium equal)
        self.original_space = original_space
        self._obs_space = original_space
        self._options = options or {}
        self._has_repeated = _contains_repeated(original_space)
        self.shape = tuple(self._init_shape(original_space, self._options))
        self._size = int(np.prod(self.shape))
        self._i = 0
        self._observation_space: gym.spaces.Box | None = None

    # The bounds of `observation_space`. Flattened values are unbounded (RLlib 1.13
    # declared [-1, 1] for every preprocessor, which flattened Box parts exceed).
    _low, _high = -np.inf, np.inf

    @property
    def observation_space(self) -> gym.Space:
        """The space of the preprocessed observations (RLlib 1.13's property): a float32
        `Box` of `shape`, built once per `shape` (a subclass may set `shape` after
        ``__init__``, as RLlib 1.13's user preprocessors did).

        For corral's flattening preprocessors it carries the env's space as
        `original_space`, as in RLlib: models restore the structure of flattened
        Dict/Tuple/Repeated observations with it (`restore_original_dimensions`); a user
        preprocessor's own output (`_init_shape` overridden, or another `shape`) has no
        structure to restore.
        """
        shape = tuple(self.shape)
        space = self._observation_space
        if space is None or space.shape != shape:
            space = gym.spaces.Box(self._low, self._high, shape, np.float32)
            own_shape = type(self)._init_shape is not Preprocessor._init_shape
            if not own_shape and shape == (_flat_size(self.original_space),):
                # An env that declared an old `gym.spaces` space shows models that very
                # space: RLlib 1.x models check `isinstance(orig_space, gym.spaces.Dict)`.
                from corral.env.gym_compat import gym_space_of

                space.original_space = gym_space_of(self.original_space)  # type: ignore[attr-defined]
            self._observation_space = space
        return space

    def _init_shape(self, obs_space: gym.Space, options: dict) -> tuple[int, ...]:
        """The shape of a preprocessed observation (RLlib's hook; this class's: one flat
        row of the space's leaves, discrete parts one-hot)."""
        return (_flat_size(obs_space),)

    @property
    def size(self) -> int:
        """The number of values one preprocessed observation has."""
        return int(np.prod(self.shape))

    def transform(self, observation: Any) -> np.ndarray:
        if self._has_repeated:
            out = np.zeros(self.shape, np.float32)
            _write(self.original_space, observation, out, 0)
            return out
        return np.asarray(gym.spaces.flatten(self.original_space, observation), dtype=np.float32)

    def transform_batch(self, observations: Any) -> np.ndarray:
        return np.stack([self.transform(o) for o in observations])

    def write(self, observation: Any, array: np.ndarray, offset: int) -> None:
        """Writes the preprocessed `observation` into ``array[offset:offset + size]``."""
        array[offset : offset + self.size] = np.reshape(self.transform(observation), -1)

    def check_shape(self, observation: Any) -> None:
        """Raises ``ValueError`` if `observation` is outside the space (checked once in
        ``OBS_VALIDATION_INTERVAL`` calls, as RLlib's)."""
        if self._i % OBS_VALIDATION_INTERVAL == 0:
            candidate = observation
            if isinstance(observation, list) and isinstance(self._obs_space, gym.spaces.Box):
                candidate = np.asarray(observation, dtype=self._obs_space.dtype)
            if not self._obs_space.contains(candidate):
                raise ValueError(
                    f"Observation ({observation!r}) outside given space ({self._obs_space})!"
                )
        self._i += 1


class TupleFlatteningPreprocessor(Preprocessor):
    """Tuple observations: the parts' flat rows concatenated in order."""


class DictFlatteningPreprocessor(Preprocessor):
    """Dict observations: the entries' flat rows concatenated in the space's key order."""


class RepeatedValuesPreprocessor(Preprocessor):
    """``Repeated`` observations: the length, then ``max_len`` padded element slots."""


class NoPreprocessor(Preprocessor):
    """For Box observations: only a cast to float32 (no copy when already so)."""

    def __init__(self, obs_space: gym.spaces.Box, options: dict | None = None) -> None:
        self.original_space = original_space = obs_space
        self._obs_space = original_space
        self._options = options or {}
        self._i = 0
        self.shape = original_space.shape

    @property
    def observation_space(self) -> gym.Space:
        """The env's own Box (RLlib 1.13's: observations pass unchanged)."""
        return self._obs_space

    def transform(self, observation: Any) -> np.ndarray:
        return np.asarray(observation, dtype=np.float32)

    def transform_batch(self, observations: Any) -> np.ndarray:
        return np.asarray(observations, dtype=np.float32)


class OneHotPreprocessor(Preprocessor):
    """Discrete observations become one-hot vectors (MultiDiscrete: one per component)."""

    def transform(self, observation: Any) -> np.ndarray:
        if not isinstance(self.original_space, gym.spaces.Discrete):
            return super().transform(observation)
        out = np.zeros(self.shape, np.float32)
        out[int(observation) - int(self.original_space.start)] = 1.0
        return out

    def transform_batch(self, observations: Any) -> np.ndarray:
        if not isinstance(self.original_space, gym.spaces.Discrete):
            return super().transform_batch(observations)
        idx = np.asarray(observations, dtype=np.int64) - int(self.original_space.start)
        out = np.zeros((len(idx), self.shape[0]), np.float32)
        out[np.arange(len(idx)), idx] = 1.0
        return out


class AtariRamPreprocessor(Preprocessor):
    """Atari RAM observations (128 bytes) scaled to [-1, 1)."""

    _low, _high = -1.0, 1.0

    def _init_shape(self, obs_space: gym.Space, options: dict) -> tuple[int, ...]:
        return (128,)

    def transform(self, observation: Any) -> np.ndarray:
        return (np.asarray(observation, dtype=np.float32) - 128.0) / 128.0


class GenericPixelPreprocessor(Preprocessor):
    """Raw Atari-sized frames (``210 x 160 x 3``) as RLlib 1.13 preprocessed them, for
    envs that are not wrapped in DeepMind's processing (`preprocessor_pref` "rllib" or
    None, or an env of that shape that is no Atari game).

    25 rows are cut off at the top and the bottom, the rest is resized to ``dim x dim``
    (through ``84 x 84`` first when ``dim`` is smaller), averaged into one grey channel
    with ``grayscale``, and scaled to ``[-1, 1)`` with ``zero_mean`` (else ``[0, 1]``):
    the model config's keys `dim`, `grayscale` and `zero_mean`. Needs OpenCV (the
    ``atari`` extra), as RLlib did.
    """

    _low, _high = -1.0, 1.0

    def __init__(self, obs_space: gym.Space, options: dict | None = None) -> None:
        try:
            import cv2
        except ImportError as err:
            raise ImportError(
                f"Observations of shape {ATARI_OBS_SHAPE} are resized by RLlib's "
                "GenericPixelPreprocessor, which needs OpenCV: pip install 'corral[atari]'"
                " (or set `_disable_preprocessor_api: True` to keep the raw frames)."
            ) from err
        self._resize = cv2.resize
        super().__init__(obs_space, options)

    def _init_shape(self, obs_space: gym.Space, options: dict) -> tuple[int, ...]:
        from corral.models.model_defaults import MODEL_DEFAULTS

        def option(key: str) -> Any:
            value = options.get(key)
            return MODEL_DEFAULTS[key] if value is None else value

        self._grayscale = bool(option("grayscale"))
        self._zero_mean = bool(option("zero_mean"))
        self._dim = int(option("dim"))
        return (self._dim, self._dim, 1 if self._grayscale else 3)

    def transform(self, observation: Any) -> np.ndarray:
        self.check_shape(observation)
        frame = np.asarray(observation)[25:-25]
        if self._dim < 84:  # (RLlib's: a small frame goes through 84 x 84 first)
            frame = self._resize(frame, (84, 84))
        frame = self._resize(frame, (self._dim, self._dim))
        pixels = frame.astype(np.float32)
        if self._grayscale:
            pixels = pixels.mean(axis=2, keepdims=True)
        return (pixels - 128.0) / 128.0 if self._zero_mean else pixels / 255.0


def get_preprocessor(space: gym.Space) -> type[Preprocessor]:
    """The preprocessor class for an observation space (RLlib's; instantiate it with the
    space: ``get_preprocessor(space)(space)``).

    Discrete and MultiDiscrete spaces one-hot, a 128-byte Box is Atari RAM, raw Atari
    frames are resized (``GenericPixelPreprocessor``), Tuple, Dict and ``Repeated`` spaces
    flatten; any other space passes through (``NoPreprocessor``).
    """
    space = convert_space(space)
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
        return OneHotPreprocessor
    if getattr(space, "shape", None) == ATARI_RAM_OBS_SHAPE:
        return AtariRamPreprocessor
    if getattr(space, "shape", None) == ATARI_OBS_SHAPE:
        return GenericPixelPreprocessor
    if isinstance(space, gym.spaces.Tuple):
        return TupleFlatteningPreprocessor
    if isinstance(space, gym.spaces.Dict):
        return DictFlatteningPreprocessor
    if isinstance(space, Repeated):
        return RepeatedValuesPreprocessor
    return NoPreprocessor


# Name -> class of the preprocessors registered with
# `ModelCatalog.register_custom_preprocessor` (RLlib 1.13's, deprecated).
_CUSTOM_PREPROCESSORS: dict[str, type[Preprocessor]] = {}


def register_custom_preprocessor_class(name: str, cls: type) -> None:
    """Makes `cls` available as `{"custom_preprocessor": name}` (see
    `ModelCatalog.register_custom_preprocessor`).

    Raises:
        TypeError: `cls` is not a `Preprocessor` subclass.
    """
    if not (isinstance(cls, type) and issubclass(cls, Preprocessor)):
        raise TypeError(
            f"register_custom_preprocessor({name!r}, {cls!r}): the preprocessor must be a "
            "subclass of corral.models.preprocessors.Preprocessor (overriding `_init_shape` "
            "and `transform`)."
        )
    _CUSTOM_PREPROCESSORS[name] = cls


def custom_preprocessor_class(custom: str | type) -> type[Preprocessor]:
    """The class a `custom_preprocessor` setting names (a registered name, or the class).

    Raises:
        ValueError: no preprocessor is registered under that name.
        TypeError: a class that is not a `Preprocessor` subclass.
    """
    if isinstance(custom, str):
        if custom not in _CUSTOM_PREPROCESSORS:
            import difflib

            close = difflib.get_close_matches(custom, list(_CUSTOM_PREPROCESSORS), n=3)
            hint = f" Did you mean {close}?" if close else ""
            raise ValueError(
                f"No custom preprocessor registered under {custom!r}; registered: "
                f"{sorted(_CUSTOM_PREPROCESSORS)}.{hint} Register it first with "
                f"ModelCatalog.register_custom_preprocessor({custom!r}, cls)."
            )
        return _CUSTOM_PREPROCESSORS[custom]
    if isinstance(custom, type) and issubclass(custom, Preprocessor):
        return custom
    raise TypeError(
        f"model.custom_preprocessor={custom!r}: expected a name registered with "
        "ModelCatalog.register_custom_preprocessor or a Preprocessor subclass."
    )


def preprocessor_for_space(space: gym.Space, options: dict | None = None) -> Preprocessor:
    """The preprocessor corral's policies use for an observation space (an instance).

    A `custom_preprocessor` in `options` (the model config) replaces the default one
    (RLlib 1.13 deprecates it, and so logs a warning once per process). Otherwise Box
    observations are only cast to float32 (images are handled by the env wrappers and
    the vision net), except raw Atari-sized frames (``210 x 160 x 3``: an env left
    without DeepMind's processing), which RLlib 1.13 resized here
    (``GenericPixelPreprocessor``); the rest as :func:`get_preprocessor` says.
    """
    custom = (options or {}).get("custom_preprocessor")
    if custom:
        from corral.utils.deprecation import deprecation_warning, log_once

        cls = custom_preprocessor_class(custom)
        if log_once("model.custom_preprocessor"):
            deprecation_warning(
                old="model.custom_preprocessor",
                new="gym.ObservationWrapper around your env or handle complex inputs inside "
                "your Model",
                error=False,
            )
        return cls(space, options)
    space = convert_space(space)
    if isinstance(space, gym.spaces.Box):
        if space.shape == ATARI_OBS_SHAPE:
            return GenericPixelPreprocessor(space, options)
        return NoPreprocessor(space)
    if isinstance(space, gym.spaces.Discrete):
        return OneHotPreprocessor(space)
    if isinstance(space, (gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return Preprocessor(space)
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple, Repeated)):
        return get_preprocessor(space)(space)
    raise UnsupportedSpaceException(
        f"Observation space {space} is not supported: expected Box, Discrete, "
        "MultiDiscrete, MultiBinary, Dict, Tuple or Repeated."
    )


def restore_original_dimensions(obs: Any, obs_space: gym.Space, tensorlib: Any = None) -> Any:
    """Flat observation rows [B, n] -> the structure of `obs_space.original_space`.

    Dict and Tuple observations travel flattened (gymnasium's order, discrete
    parts one-hot); a model gets them back as dicts/tuples of [B, ...]
    tensors, a ``Repeated`` part as ``RepeatedValues`` (values ``[B, max_len, ...]``,
    lengths ``[B]``). Other spaces pass through unchanged.

    Args:
        obs: the flat rows (a torch tensor or numpy array).
        obs_space: the preprocessed space (its ``original_space`` tells the structure).
        tensorlib: unused (RLlib's choice of TF/torch/numpy; corral reshapes `obs` itself).
    """
    from corral.env.gym_compat import convert_space

    # An old gym space (see Preprocessor) is read as its Gymnasium equal; a space
    # without `original_space` is the structure itself (RLlib 1.13's fallback).
    original = convert_space(getattr(obs_space, "original_space", obs_space))
    if not isinstance(original, (gym.spaces.Dict, gym.spaces.Tuple, Repeated)):
        return obs
    if isinstance(obs, (dict, tuple, list)):
        return obs  # already restored
    restored, _ = _unflatten(obs, original, 0)
    return restored


def raw_observations(obs: Any, space: gym.Space) -> Any:
    """Flat observation rows [B, n] (a torch tensor or numpy array, as the preprocessor
    of `space` wrote them) -> the observations as the env gave them, batched: Dict/Tuple
    structures of [B, ...] leaves, a Discrete part as its int64 value (not one-hot), a
    MultiDiscrete part as its int64 values, a MultiBinary part as its values in the
    space's dtype, a Box part in its shape (a ``Repeated`` part as ``RepeatedValues``).

    What models get under `_disable_preprocessor_api` (RLlib 1.13: observations reach
    the model unpreprocessed); the rows themselves are lossless, so this is exact.
    """
    from corral.env.gym_compat import convert_space

    return _raw(obs, convert_space(space), 0)[0]


def _as_ints(values: Any, dtype: Any = np.int64) -> Any:
    """`values` (a tensor or an array) cast to an integer dtype."""
    if isinstance(values, np.ndarray):
        return values.astype(dtype)
    import torch

    return values.to(torch.from_numpy(np.zeros(0, dtype)).dtype)


def _walk(
    obs: Any, space: gym.Space, start: int, leaf: Callable[[Any, gym.Space, int], tuple[Any, int]]
) -> tuple[Any, int]:
    """The value of `space` in flat rows `obs` from column `start`, and the column after
    it: Dict/Tuple structure rebuilt here, each other space's part by `leaf`."""
    if isinstance(space, gym.spaces.Dict):
        out = {}
        for key, sub in space.spaces.items():
            out[key], start = _walk(obs, sub, start, leaf)
        return out, start
    if isinstance(space, gym.spaces.Tuple):
        parts = []
        for sub in space.spaces:
            part, start = _walk(obs, sub, start, leaf)
            parts.append(part)
        return tuple(parts), start
    return leaf(obs, space, start)


def _raw(obs: Any, space: gym.Space, start: int) -> tuple[Any, int]:
    """`_walk` with the env's values: discrete parts as integers, boxes in their shape."""
    return _walk(obs, space, start, _raw_leaf)


def _raw_leaf(obs: Any, space: gym.Space, start: int) -> tuple[Any, int]:
    lead = obs.shape[:-1]
    if isinstance(space, Repeated):
        return _unflattened_leaf(obs, space, start)
    end = start + _flat_size(space)
    rows = obs[..., start:end]
    if isinstance(space, gym.spaces.Discrete):
        return _as_ints(rows.argmax(-1)) + int(space.start), end
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = np.asarray(space.nvec).ravel()
        bounds = np.concatenate([[0], np.cumsum(nvec)])
        parts = [_as_ints(rows[..., a:b].argmax(-1)) for a, b in zip(bounds[:-1], bounds[1:])]
        stacked = np.stack(parts, -1) if isinstance(rows, np.ndarray) else _torch_stack(parts)
        values = stacked.reshape(*lead, *space.shape)
        return values + _as_ints(_like(values, np.asarray(space.start).astype(np.int64))), end
    if isinstance(space, gym.spaces.MultiBinary):
        return _as_ints(rows, space.dtype).reshape(*lead, *space.shape), end
    return rows.reshape(*lead, *space.shape), end


def _torch_stack(parts: list[Any]) -> Any:
    import torch

    return torch.stack(parts, -1)


def _like(reference: Any, array: np.ndarray) -> Any:
    """`array` as the kind (tensor on the same device, or array) of `reference`."""
    if isinstance(reference, np.ndarray):
        return array
    import torch

    return torch.as_tensor(array, device=reference.device)


def _unflatten(obs: Any, space: gym.Space, start: int) -> tuple[Any, int]:
    """`_walk` with each part's flat columns (boxes reshaped, repeated values as
    `RepeatedValues`)."""
    return _walk(obs, space, start, _unflattened_leaf)


def _unflattened_leaf(obs: Any, space: gym.Space, start: int) -> tuple[Any, int]:
    if isinstance(space, Repeated):
        from corral.models.repeated_values import RepeatedValues

        child = _flat_size(space.child_space)
        lengths = obs[..., start]
        rows = obs[..., start + 1 : start + 1 + space.max_len * child]
        rows = rows.reshape(*obs.shape[:-1], space.max_len, child)
        values, _ = _unflatten(rows, space.child_space, 0)
        return RepeatedValues(values, lengths, space.max_len), start + _flat_size(space)
    size = int(gym.spaces.flatdim(space))
    leaf = obs[..., start : start + size]
    if isinstance(space, gym.spaces.Box):
        leaf = leaf.reshape(*obs.shape[:-1], *space.shape)
    return leaf, start + size
