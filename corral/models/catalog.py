"""``ModelCatalog``: picks the model and action distribution for a pair of spaces.

Policies never name a model class: they ask the catalog, which honours the ``"model"``
config (``custom_model``, ``custom_action_dist``) and otherwise picks the default for the
space, so users swap networks through config alone, as in RLlib 1.x.
"""

from __future__ import annotations

import difflib
import functools
import logging
from typing import Any

import gymnasium as gym
import numpy as np

from corral.env.gym_compat import convert_space
from corral.models.model_defaults import MODEL_DEFAULTS
from corral.models.preprocessors import (
    Preprocessor,
    get_preprocessor,
    preprocessor_for_space,
    register_custom_preprocessor_class,
)
from corral.models.torch.attention_net import AttentionWrapper
from corral.models.torch.complex_input_net import ComplexInputNetwork, has_image_part
from corral.models.torch.fcnet import FullyConnectedNetwork
from corral.models.torch.recurrent_net import LSTMWrapper
from corral.models.torch.torch_action_dist import (
    TorchCategorical,
    TorchDeterministic,
    TorchDiagGaussian,
    TorchDistributionWrapper,
    TorchMultiActionDistribution,
    TorchMultiCategorical,
)
from corral.models.torch.torch_modelv2 import ModelConfigDict, TorchModelV2
from corral.models.torch.visionnet import VisionNetwork
from corral.utils.deprecation import Deprecated
from corral.utils.error import UnsupportedSpaceException
from corral.utils.spaces import flat_action_width, flatten_space, int_box_sizes, is_int_box

logger = logging.getLogger(__name__)

_CUSTOM_MODELS: dict[str, type] = {}
_CUSTOM_ACTION_DISTS: dict[str, type] = {}


def _check_framework(framework: str) -> None:
    if framework != "torch":
        raise ValueError(
            f"framework={framework!r} is not available: corral only builds torch models "
            "(framework='torch')."
        )


def _lookup(registry: dict[str, type], name: str, what: str, register_fn: str) -> type:
    if name in registry:
        return registry[name]
    close = difflib.get_close_matches(name, list(registry), n=3)
    hint = f" Did you mean {close}?" if close else ""
    raise ValueError(
        f"No {what} registered under {name!r}; registered: {sorted(registry)}.{hint} "
        f"Register it first with ModelCatalog.{register_fn}({name!r}, cls)."
    )


def custom_model_class(custom: str | type) -> type:
    """The class a `custom_model` setting names: a name registered with
    `ModelCatalog.register_custom_model`, or the class itself.

    Raises:
        ValueError: no model is registered under that name.
    """
    if isinstance(custom, str):
        return _lookup(_CUSTOM_MODELS, custom, "custom model", "register_custom_model")
    return custom


def _build_custom(model_cls: type, config: dict, args: tuple, model_kwargs: dict) -> Any:
    """A custom model `model_cls(*args, **model_kwargs, **custom_model_config)`; one that
    takes no such keywords (RLlib 1.13's models read them from
    `model_config["custom_model_config"]`) is built again without them, with a warning.

    Raises:
        TypeError: the constructor rejects the keywords, and fails without them too.
    """
    custom_kwargs = config.get("custom_model_config") or {}
    kwargs = {**model_kwargs, **custom_kwargs}
    name = getattr(model_cls, "__name__", repr(model_cls))
    try:
        return model_cls(*args, **kwargs)
    except TypeError as err:
        if not (kwargs and "unexpected keyword argument" in str(err)):
            raise
        if not custom_kwargs:
            raise TypeError(
                f"{name}.__init__ rejected keyword arguments {sorted(kwargs)} ({err})."
            ) from err
        first_error = err
    logger.warning(
        "Custom model %s should accept its custom_model_config entries as **kwargs "
        "(retried without them; it reads model_config['custom_model_config']).",
        name,
    )
    try:
        return model_cls(*args, **model_kwargs)
    except TypeError as err:
        raise TypeError(
            f"{name}.__init__ rejected keyword arguments {sorted(kwargs)}: entries of "
            "'custom_model_config' are passed to the custom model's constructor as keyword "
            f"arguments ({first_error}); without them it failed too ({err})."
        ) from err


def _wrap_if_needed(model_cls: type, model_interface: type | None) -> type:
    """Mix ``model_interface`` in front of ``model_cls`` (e.g. a Q-head interface over FCNet).

    The interface comes first in the MRO so its ``__init__`` (which takes the extra
    algorithm kwargs) runs and reaches ``model_cls.__init__`` through ``super()``.
    """
    if model_interface is None or issubclass(model_cls, model_interface):
        return model_cls
    name = f"{model_interface.__name__}_as_{model_cls.__name__}"
    return type(name, (model_interface, model_cls), {})


def _is_image(space: gym.Space) -> bool:
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 3


class ModelCatalog:
    """Registry and factory for models and action distributions (all staticmethods)."""

    @staticmethod
    def get_action_dist(
        action_space: gym.Space,
        config: ModelConfigDict | None,
        dist_type: str | type | None = None,
        framework: str = "torch",
        **kwargs: Any,
    ) -> tuple[Any, int]:
        """Return ``(dist_class, num_outputs)`` for ``action_space``.

        Args:
            action_space: ``Discrete`` -> :class:`TorchCategorical`, 1-D ``Box`` ->
                :class:`TorchDiagGaussian` (``num_outputs = 2 * dim``), ``MultiDiscrete`` ->
                :class:`TorchMultiCategorical` (returned as a ``functools.partial`` binding
                ``input_lens``, like RLlib 1.x), an integer-dtype ``Box`` of any shape ->
                :class:`TorchMultiCategorical` over each element's ``high - low + 1``
                values (its samples are the values, in ``[low, high]``).
            config: the ``"model"`` config; ``custom_action_dist`` (a registered name or
                a class) takes precedence over everything else.
            dist_type: a distribution class to use, or ``"deterministic"`` for a point
                mass at the model output (DDPG/TD3 actors).
            framework: only ``"torch"``.

        Raises:
            UnsupportedSpaceException: for spaces without a distribution.
        """
        _check_framework(framework)
        action_space = convert_space(action_space)  # (an old gym space a 1.x model holds)
        config = config or MODEL_DEFAULTS
        custom = config.get("custom_action_dist")
        if custom:
            if isinstance(custom, str):
                custom = _lookup(
                    _CUSTOM_ACTION_DISTS,
                    custom,
                    "action distribution",
                    "register_custom_action_dist",
                )
            return custom, int(custom.required_model_output_shape(action_space, config))

        if isinstance(dist_type, type) and issubclass(dist_type, TorchDistributionWrapper):
            return dist_type, int(dist_type.required_model_output_shape(action_space, config))
        if dist_type == "deterministic":
            if not isinstance(action_space, gym.spaces.Box) or is_int_box(action_space):
                raise UnsupportedSpaceException(
                    f"dist_type='deterministic' needs a float Box action space, got {action_space}."
                )
            return TorchDeterministic, TorchDeterministic.required_model_output_shape(
                action_space, config
            )
        if dist_type is not None:
            raise ValueError(
                f"Unknown dist_type {dist_type!r}: expected None, 'deterministic' or a "
                "TorchDistributionWrapper subclass."
            )

        if isinstance(action_space, gym.spaces.Discrete):
            return TorchCategorical, TorchCategorical.required_model_output_shape(
                action_space, config
            )
        if is_int_box(action_space):
            sizes = int_box_sizes(action_space)  # (raises for unbounded / huge spaces)
            dist = functools.partial(
                TorchMultiCategorical, input_lens=sizes, action_space=action_space
            )
            return dist, sum(sizes)
        if isinstance(action_space, gym.spaces.Box):
            if len(action_space.shape) > 1:
                raise UnsupportedSpaceException(
                    f"Action space {action_space} has shape {action_space.shape}: only 1-D "
                    "float Box action spaces are supported (integer Box ones of any shape); "
                    "reshape it to one dimension in an action wrapper."
                )
            return TorchDiagGaussian, TorchDiagGaussian.required_model_output_shape(
                action_space, config
            )
        if isinstance(action_space, gym.spaces.MultiDiscrete):
            dist = functools.partial(
                TorchMultiCategorical,
                input_lens=[int(n) for n in np.asarray(action_space.nvec).ravel()],
                action_space=action_space,
            )
            return dist, TorchMultiCategorical.required_model_output_shape(action_space, config)
        if isinstance(action_space, (gym.spaces.Tuple, gym.spaces.Dict)):
            leaves = flatten_space(action_space)
            children = [ModelCatalog.get_action_dist(leaf, config) for leaf in leaves]
            dist = functools.partial(
                TorchMultiActionDistribution,
                child_distributions=[child for child, _ in children],
                input_lens=[n for _, n in children],
                action_space=action_space,
            )
            return dist, sum(n for _, n in children)
        raise UnsupportedSpaceException(
            f"Unsupported action space {action_space} (type {type(action_space).__name__}): "
            "corral has action distributions for Discrete, MultiDiscrete, integer Box, 1-D "
            "float Box spaces and Tuple/Dict spaces of those."
        )

    @staticmethod
    def get_action_shape(
        action_space: gym.Space, framework: str = "torch"
    ) -> tuple[type, tuple[int | None, ...]]:
        """``(numpy dtype, batch shape with None for the batch axis)`` of an action batch."""
        _check_framework(framework)
        action_space = convert_space(action_space)
        if isinstance(action_space, gym.spaces.Discrete):
            return np.int64, (None,)
        if isinstance(action_space, gym.spaces.MultiDiscrete) or is_int_box(action_space):
            return np.int64, (None, *action_space.shape)
        if isinstance(action_space, gym.spaces.Box):
            return np.float32, (None, *action_space.shape)
        if isinstance(action_space, (gym.spaces.Tuple, gym.spaces.Dict)):
            # Flat rows (see TorchMultiActionDistribution).
            return np.float32, (None, flat_action_width(action_space))
        raise UnsupportedSpaceException(f"Unsupported action space {action_space}.")

    @staticmethod
    def get_action_placeholder(action_space: gym.Space, name: str = "action") -> Any:
        """TensorFlow-only (a `tf1.placeholder` for a static graph); torch has no
        placeholders.

        Raises:
            TensorFlowOnlyError: always; use `get_action_shape(action_space)` for the
                dtype and shape of an action batch, and torch tensors of that shape.
        """
        from corral._surface import TensorFlowOnlyError

        raise TensorFlowOnlyError(
            "ModelCatalog.get_action_placeholder() builds a TensorFlow graph placeholder; "
            "corral runs on PyTorch only and has no placeholders: use "
            "ModelCatalog.get_action_shape(action_space) for an action batch's dtype and "
            "shape."
        )

    @staticmethod
    def get_model_v2(
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int,
        model_config: ModelConfigDict | None,
        framework: str = "torch",
        name: str = "default_model",
        model_interface: type | None = None,
        default_model: type | None = None,
        **model_kwargs: Any,
    ) -> TorchModelV2:
        """Build the policy's model.

        ``model_config`` is merged over ``MODEL_DEFAULTS``, so partial dicts work. A
        ``custom_model`` (registered name or class) is called as
        ``cls(obs_space, action_space, num_outputs, model_config, name, **model_kwargs,
        **custom_model_config)``. Otherwise ``default_model`` is used if given, else
        :class:`VisionNetwork` for images (``Box`` of shape ``[H, W, C]``),
        :class:`ComplexInputNetwork` for ``Dict``/``Tuple`` spaces with an image part (and
        for every space but a ``Box`` under ``_disable_preprocessor_api``, whose models get
        the observations unpreprocessed), and
        :class:`FullyConnectedNetwork` for any other observation space that flattens to a
        vector (``Box`` of rank 1 or 2, ``Discrete``, and the ``MultiDiscrete``/
        ``MultiBinary``/``Dict``/``Tuple`` spaces the preprocessor one-hots and
        concatenates). With ``use_lstm``, the default model's features feed an
        :class:`LSTMWrapper`; with ``use_attention``, an :class:`AttentionWrapper` (GTrXL).

        Args:
            model_interface: a class mixed in front of the model class (its ``__init__``
                takes ``model_kwargs``), e.g. an algorithm's Q-head model.

        Raises:
            UnsupportedSpaceException: for observation spaces that cannot be flattened.
        """
        _check_framework(framework)
        # (Old gym spaces, as RLlib 1.x code passes them, as their Gymnasium equals.)
        obs_space, action_space = convert_space(obs_space), convert_space(action_space)
        config = {**MODEL_DEFAULTS, **(model_config or {})}
        # The recurrent wrappers: the (default or custom) model's features feed an LSTM or
        # a GTrXL.
        wrappers = {"use_lstm": LSTMWrapper, "use_attention": AttentionWrapper}
        chosen = [key for key in wrappers if config.get(key)]
        if len(chosen) > 1:
            raise ValueError("Only one of `use_lstm` or `use_attention` may be set to True!")
        wrapper = wrappers[chosen[0]] if chosen else None
        if wrapper is not None and model_interface is not None:
            raise NotImplementedError(
                f"{chosen[0]} with the {model_interface.__name__} model interface is not "
                "supported: only policy-gradient models can be wrapped in a recurrent model."
            )
        custom = config.get("custom_model")
        if custom:
            custom = custom_model_class(custom)
            model_cls = _wrap_if_needed(custom, model_interface)
            # A model written for RLlib 1.x is given the old gym action space its env
            # declared, which such models compare against (`action_space != Tuple(...)`).
            from corral.env.gym_compat import gym_space_of

            custom_space = gym_space_of(action_space)
            if wrapper is None:
                return _build_custom(
                    model_cls,
                    config,
                    (obs_space, custom_space, num_outputs, config, name),
                    model_kwargs,
                )
            # As RLlib 1.13 auto-wraps a custom model: built with `num_outputs=None` (it
            # picks its output size, the wrapper's input), the wrapper on top.
            base = _build_custom(
                model_cls, config, (obs_space, custom_space, None, config, f"{name}_base"), {}
            )
            return wrapper(
                obs_space, action_space, num_outputs, config, name, base=base, **model_kwargs
            )

        if default_model is None and _is_image(obs_space):
            default_model = VisionNetwork
        if default_model is None and has_image_part(obs_space):
            default_model = ComplexInputNetwork
        if (
            default_model is None
            and config.get("_disable_preprocessor_api")
            and not isinstance(obs_space, gym.spaces.Box)
        ):
            # Observations reach the model as the env gives them (RLlib 1.13's choice:
            # a net per part, discrete parts one-hot in the model).
            default_model = ComplexInputNetwork
        if default_model is None:
            try:
                gym.spaces.utils.flatdim(obs_space)
            except (NotImplementedError, ValueError, TypeError) as err:
                raise UnsupportedSpaceException(
                    f"No default model for observation space {obs_space} (type "
                    f"{type(obs_space).__name__}): it cannot be flattened to a vector. "
                    "Use a custom_model."
                ) from err
            default_model = FullyConnectedNetwork
        if wrapper is not None:
            base = default_model(obs_space, action_space, None, config, f"{name}_base")
            return wrapper(
                obs_space, action_space, num_outputs, config, name, base=base, **model_kwargs
            )
        model_cls = _wrap_if_needed(default_model, model_interface)
        return model_cls(obs_space, action_space, num_outputs, config, name, **model_kwargs)

    @staticmethod
    def get_preprocessor_for_space(
        observation_space: gym.Space, options: ModelConfigDict | None = None
    ) -> Preprocessor:
        """The preprocessor for ``observation_space`` (an instance; its ``shape`` is the
        model's input). ``options``: the model config; its ``custom_preprocessor`` (a name
        registered with `register_custom_preprocessor`, or the class) is built as
        ``cls(observation_space, options)``, as the policies build it (deprecated in
        RLlib 1.13, so it logs a deprecation warning once).

        Raises:
            ValueError: ``custom_preprocessor`` names no registered preprocessor.
        """
        options = dict(options or {})
        if options.get("custom_preprocessor"):
            return preprocessor_for_space(observation_space, options)
        return get_preprocessor(observation_space)(observation_space, options)

    @staticmethod
    def get_preprocessor(env: Any, options: ModelConfigDict | None = None) -> Preprocessor:
        """``get_preprocessor_for_space`` of ``env.observation_space``."""
        return ModelCatalog.get_preprocessor_for_space(env.observation_space, options)

    @staticmethod
    @Deprecated(error=False)
    def register_custom_preprocessor(preprocessor_name: str, preprocessor_class: type) -> None:
        """Make ``preprocessor_class`` (a `Preprocessor` subclass overriding `_init_shape`
        and `transform`) available as ``{"custom_preprocessor": preprocessor_name}``: it
        replaces the default preprocessor of the policies whose model config names it,
        and its `observation_space` is what their models see. Deprecated, as in RLlib
        1.13: wrap the env in a `gymnasium.ObservationWrapper` instead.

        Raises:
            TypeError: ``preprocessor_class`` is not a `Preprocessor` subclass.
        """
        register_custom_preprocessor_class(preprocessor_name, preprocessor_class)

    @staticmethod
    def register_custom_model(model_name: str, model_class: type) -> None:
        """Make ``model_class`` available as ``{"custom_model": model_name}``."""
        if not (isinstance(model_class, type) and issubclass(model_class, TorchModelV2)):
            raise TypeError(
                f"register_custom_model({model_name!r}, {model_class!r}): the model must be "
                "a subclass of corral.models.torch.torch_modelv2.TorchModelV2."
            )
        _CUSTOM_MODELS[model_name] = model_class

    @staticmethod
    def register_custom_action_dist(action_dist_name: str, action_dist_class: type) -> None:
        """Make ``action_dist_class`` available as ``{"custom_action_dist": name}``."""
        _CUSTOM_ACTION_DISTS[action_dist_name] = action_dist_class
