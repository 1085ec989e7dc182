"""RLlib 1.13's RecSim wrappers, as Gymnasium wrappers that need no `recsim` package.

RecSim (Google Research's recommender-system simulator) needs TensorFlow, which corral
never imports. Its envs speak an observation dict ``{"user", "doc", "response"}`` and a
``MultiDiscrete([num_candidates] * slate_size)`` slate action; these wrappers fix what
RLlib needs fixed in such envs, whatever env speaks that layout:

- :class:`RecSimObservationSpaceWrapper`: ``"doc"`` keyed by the candidates' positions
  (``"0"`` .. ``"n-1"``) instead of RecSim's document ids, which change every step;
- :class:`RecSimObservationBanditWrapper`: ``"doc"`` stacked into one ``"item"`` array
  ``[num_candidates, features]``, the layout of corral's bandit trainers;
- :class:`RecSimResetWrapper`: a reset observation with a ``"response"`` (RecSim's has
  none) and a ``close()`` that does not raise;
- :class:`MultiDiscreteToDiscreteActionWrapper`: a slate as one ``Discrete`` index, for
  algorithms that only take ``Discrete`` actions (DQN, bandits);
- :func:`recsim_gym_wrapper`: all of them, in RLlib's order.

corral's own numpy simulation, :class:`corral.env.recommender_system.InterestEvolutionEnv`
(``"RecSysInterestEvolution-v0"``), has RecSim's layout; :class:`InterestEvolutionRecSimEnv`
is it passed through :func:`recsim_gym_wrapper`, as RLlib 1.13's example env of that name
is RecSim's interest-evolution model through it. RLlib's other two example envs
(``LongTermSatisfactionRecSimEnv``, ``InterestExplorationRecSimEnv``) are RecSim's own user
models and have no counterpart here; :func:`make_recsim_env`, which builds an env from
RecSim's user-model and document-sampler classes, makes a class that raises naming the
`recsim` package.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from corral.env.recommender_system import InterestEvolutionEnv
from corral.utils.error import UnsupportedSpaceException
from corral.utils.keyword_aliases import keyword_aliases
from corral.utils.spaces.space_utils import convert_element_to_space_type


def _dict_entry(space: gym.Space, key: str, wrapper: str) -> gym.Space:
    """``space[key]`` of a RecSim observation space, or an UnsupportedSpaceException."""
    if not isinstance(space, gym.spaces.Dict) or key not in space.spaces:
        raise UnsupportedSpaceException(
            f"{wrapper} needs RecSim's observation space, a Dict with 'user', 'doc' and "
            f"'response' entries ('doc' a Dict of documents); got {space}."
        )
    return space.spaces[key]


class RecSimObservationSpaceWrapper(gym.ObservationWrapper):
    """Keys the ``"doc"`` observations by the candidates' positions.

    RecSim keys each step's documents by their ids, which change every step, so the
    observation space would too. This wrapper keys them ``"0"`` .. ``"n-1"`` in the order
    the env lists them (the order the slate action indexes them in); ``"user"`` and
    ``"response"`` pass through. Observations are cast to the space's dtypes.

    Args:
        env: an env with RecSim's observation space.

    Raises:
        UnsupportedSpaceException: the observation space is not RecSim's dict.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.observation_space
        name = type(self).__name__
        docs = _dict_entry(space, "doc", name)
        if not isinstance(docs, gym.spaces.Dict):
            raise UnsupportedSpaceException(f"{name}: 'doc' must be a Dict space; got {docs}.")
        # An OrderedDict: a plain dict would be sorted as strings ("10" before "2").
        doc_space = gym.spaces.Dict(
            OrderedDict((str(i), s) for i, s in enumerate(docs.spaces.values()))
        )
        self._num_docs = len(doc_space.spaces)
        self.observation_space = gym.spaces.Dict(
            OrderedDict(
                [
                    ("user", _dict_entry(space, "user", name)),
                    ("doc", doc_space),
                    ("response", _dict_entry(space, "response", name)),
                ]
            )
        )
        self._sampled_obs = self.observation_space.sample()

    @keyword_aliases(obs="observation")
    def observation(self, observation: dict[str, Any]) -> dict[str, Any]:
        """RecSim's observation with its documents keyed by position."""
        docs = {str(i): doc for i, doc in enumerate(observation["doc"].values())}
        if len(docs) != self._num_docs:
            raise ValueError(
                f"{type(self).__name__}: the env observed {len(docs)} documents, its "
                f"observation space has {self._num_docs}."
            )
        new_obs = {"user": observation["user"], "doc": docs, "response": observation["response"]}
        return convert_element_to_space_type(new_obs, self._sampled_obs)


class RecSimObservationBanditWrapper(gym.ObservationWrapper):
    """Stacks the ``"doc"`` observations into one ``"item"`` array for bandits.

    corral's bandit trainers (`BanditLinUCBTrainer`, `BanditLinTSTrainer`) read item
    features from a ``"item"`` entry ``[num_items, feature_dim]``: row ``i`` is the
    ``i``-th document the env lists. The ``"item"`` box's bounds are the documents'
    (RLlib 1.13 fixes them to [-1, 1]). ``"user"`` and ``"response"`` pass through.

    Args:
        env: an env with RecSim's observation space whose documents are `Box` spaces of
            one 1-D shape.

    Raises:
        UnsupportedSpaceException: the observation space is not RecSim's dict, or its
            documents are not 1-D boxes of one shape.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.observation_space
        name = type(self).__name__
        docs = _dict_entry(space, "doc", name)
        doc_spaces = list(docs.spaces.values()) if isinstance(docs, gym.spaces.Dict) else []
        if not doc_spaces or not all(
            isinstance(s, gym.spaces.Box) and len(s.shape) == 1 and s.shape == doc_spaces[0].shape
            for s in doc_spaces
        ):
            raise UnsupportedSpaceException(
                f"{name} stacks the documents into one array: 'doc' must be a Dict of 1-D "
                f"Box spaces of one shape; got {docs}."
            )
        boxes: list[gym.spaces.Box] = doc_spaces  # type: ignore[assignment]
        dtype = np.result_type(*(b.dtype for b in boxes))
        item_space = gym.spaces.Box(
            low=np.stack([b.low for b in boxes]).astype(dtype),
            high=np.stack([b.high for b in boxes]).astype(dtype),
            dtype=dtype,
        )
        self.observation_space = gym.spaces.Dict(
            OrderedDict(
                [
                    ("user", _dict_entry(space, "user", name)),
                    ("item", item_space),
                    ("response", _dict_entry(space, "response", name)),
                ]
            )
        )
        self._sampled_obs = self.observation_space.sample()

    @keyword_aliases(obs="observation")
    def observation(self, observation: dict[str, Any]) -> dict[str, Any]:
        """RecSim's observation with its documents stacked under ``"item"``."""
        items = np.stack([np.asarray(d) for d in observation["doc"].values()])
        new_obs = {
            "user": observation["user"],
            "item": items,
            "response": observation["response"],
        }
        return convert_element_to_space_type(new_obs, self._sampled_obs)


class RecSimResetWrapper(gym.Wrapper):
    """Gives reset observations a ``"response"`` and makes ``close()`` a no-op if it raises.

    RecSim's reset observation has no ``"response"`` (nothing was recommended yet), which
    is not in its observation space; this wrapper adds a random one (RLlib 1.13's fix).
    An env whose reset observation has one (corral's `InterestEvolutionEnv`: no clicks)
    keeps it. Reset observations are cast to the space's dtypes. RecSim's ``close()``
    raises `NotImplementedError`; here that is ignored.

    Args:
        env: an env with RecSim's observation space.

    Raises:
        UnsupportedSpaceException: the observation space has no ``"response"`` entry.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._response_space = _dict_entry(env.observation_space, "response", type(self).__name__)
        self._sampled_obs = env.observation_space.sample()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        obs = dict(obs)
        if obs.get("response") is None:
            if seed is not None:
                self._response_space.seed(seed)
            obs["response"] = self._response_space.sample()
        return convert_element_to_space_type(obs, self._sampled_obs), info

    def close(self) -> None:
        with contextlib.suppress(NotImplementedError):
            self.env.close()


class MultiDiscreteToDiscreteActionWrapper(gym.ActionWrapper):
    """Takes a slate (``MultiDiscrete``) action as one ``Discrete`` index.

    ``Discrete(prod(nvec))``: index ``a`` is the slate whose slot ``k`` holds digit ``k``
    of ``a`` in the mixed radix ``nvec`` (slot 0 the least significant), so with
    ``nvec = [n, n]`` index ``a`` shows ``[a % n, a // n]``. Every slate has exactly one
    index (:meth:`reverse_action`), repeats included.

    Args:
        env: an env with a `MultiDiscrete` action space.

    Raises:
        UnsupportedSpaceException: the action space is not `MultiDiscrete`.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        if not isinstance(env.action_space, gym.spaces.MultiDiscrete):
            raise UnsupportedSpaceException(
                f"Action space {env.action_space} is not supported by {type(self).__name__} "
                "(it needs a MultiDiscrete space)."
            )
        self.action_space_dimensions = np.asarray(env.action_space.nvec, np.int64).reshape(-1)
        self._num_slates = int(np.prod(self.action_space_dimensions))
        self.action_space = gym.spaces.Discrete(self._num_slates)

    def action(self, action: Any) -> list[int]:
        """The slate of a `Discrete` index."""
        index = int(action)
        if not 0 <= index < self._num_slates:
            raise ValueError(
                f"{type(self).__name__}: action {action!r} is not in [0, {self._num_slates})."
            )
        slate = []
        for n in self.action_space_dimensions:
            index, slot = divmod(index, int(n))
            slate.append(slot)
        return slate

    def reverse_action(self, action: Any) -> int:
        """The `Discrete` index of a slate (the inverse of :meth:`action`)."""
        slate = np.asarray(action, np.int64).reshape(-1)
        dims = self.action_space_dimensions
        if slate.shape != dims.shape or ((slate < 0) | (slate >= dims)).any():
            raise ValueError(
                f"{type(self).__name__}: {action!r} is not a slate of the action space "
                f"MultiDiscrete({dims.tolist()})."
            )
        index = 0
        for slot, n in zip(slate[::-1], dims[::-1], strict=True):
            index = index * int(n) + int(slot)
        return index


def recsim_gym_wrapper(
    recsim_gym_env: gym.Env,
    convert_to_discrete_action_space: bool = False,
    wrap_for_bandits: bool = False,
) -> gym.Env:
    """Makes an env with RecSim's layout one corral's trainers take.

    Applies, in order, :class:`RecSimResetWrapper`, :class:`RecSimObservationSpaceWrapper`,
    :class:`MultiDiscreteToDiscreteActionWrapper` (if `convert_to_discrete_action_space`)
    and :class:`RecSimObservationBanditWrapper` (if `wrap_for_bandits`).

    Args:
        recsim_gym_env: a Gymnasium env with RecSim's observation space and slate action
            (corral's `InterestEvolutionEnv`, or a RecSim env already adapted to
            Gymnasium's reset/step API).
        convert_to_discrete_action_space: take the slate as one `Discrete` index (for DQN
            and other algorithms without `MultiDiscrete` actions).
        wrap_for_bandits: stack the documents under ``"item"`` for corral's bandits (with
            `convert_to_discrete_action_space` and a slate of one, action ``i`` is
            document ``i``).

    Returns:
        The wrapped env.
    """
    env: gym.Env = RecSimResetWrapper(recsim_gym_env)
    env = RecSimObservationSpaceWrapper(env)
    if convert_to_discrete_action_space:
        env = MultiDiscreteToDiscreteActionWrapper(env)
    if wrap_for_bandits:
        env = RecSimObservationBanditWrapper(env)
    return env


# env_config keys of RLlib's RecSim envs that choose the wrappers (the rest go to the env).
_WRAPPER_KEYS = ("convert_to_discrete_action_space", "wrap_for_bandits")


class InterestEvolutionRecSimEnv(gym.Wrapper):
    """corral's `InterestEvolutionEnv` through :func:`recsim_gym_wrapper`.

    The counterpart of RLlib 1.13's example env of this name (RecSim's interest-evolution
    model through the same wrappers), on corral's numpy simulation.

    Args:
        config: the ``env_config``: ``"convert_to_discrete_action_space"`` and
            ``"wrap_for_bandits"`` (both default False) pick the wrappers, every other key
            goes to `InterestEvolutionEnv`
            (`corral.env.recommender_system.DEFAULT_ENV_CONFIG`).
    """

    def __init__(self, config: dict | None = None) -> None:
        env_config = dict(config or {})
        flags = {k: bool(env_config.pop(k, False)) for k in _WRAPPER_KEYS}
        super().__init__(recsim_gym_wrapper(InterestEvolutionEnv(env_config), **flags))


def make_recsim_env(
    recsim_user_model_creator: Callable[[Any], Any],
    recsim_document_sampler_creator: Callable[[Any], Any],
    reward_aggregator: Callable[[list[Any]], float],
) -> type[gym.Env]:
    """An env class from RecSim user-model and document-sampler creators: not built.

    RLlib 1.13 builds RecSim's ``SingleUserEnvironment`` from them, which needs the
    `recsim` package (and TensorFlow). corral returns a class, so modules that define
    envs with it still import, but making an env raises. Use
    `corral.env.recommender_system.InterestEvolutionEnv` (``"RecSysInterestEvolution-v0"``)
    or :class:`InterestEvolutionRecSimEnv` instead, or pass an env with RecSim's layout
    through :func:`recsim_gym_wrapper`.

    Args:
        recsim_user_model_creator: EnvContext -> a RecSim ``AbstractUserModel``.
        recsim_document_sampler_creator: EnvContext -> a RecSim
            ``AbstractDocumentSampler``.
        reward_aggregator: a list of RecSim ``AbstractResponse`` -> the step's reward.

    Returns:
        An env class whose construction raises `NotImplementedError`.

    Raises:
        TypeError: an argument is not callable.
    """
    given = {
        "recsim_user_model_creator": recsim_user_model_creator,
        "recsim_document_sampler_creator": recsim_document_sampler_creator,
        "reward_aggregator": reward_aggregator,
    }
    for arg, value in given.items():
        if not callable(value):
            raise TypeError(f"make_recsim_env: {arg} must be callable; got {value!r}.")

    class _RecSimEnv(gym.Env):
        def __init__(self, config: dict | None = None) -> None:
            raise NotImplementedError(
                "make_recsim_env builds envs from RecSim's user models and document "
                "samplers, which need the `recsim` package (and TensorFlow); corral does "
                "not build RecSim-backed envs. Use "
                "corral.env.recommender_system.InterestEvolutionEnv "
                "('RecSysInterestEvolution-v0') or "
                "corral.env.wrappers.recsim.InterestEvolutionRecSimEnv, or pass an env "
                "with RecSim's observation/action layout through recsim_gym_wrapper."
            )

    return _RecSimEnv


__all__ = [
    "InterestEvolutionRecSimEnv",
    "MultiDiscreteToDiscreteActionWrapper",
    "RecSimObservationBanditWrapper",
    "RecSimObservationSpaceWrapper",
    "RecSimResetWrapper",
    "make_recsim_env",
    "recsim_gym_wrapper",
]
