"""`build_policy_class`: RLlib 1.x's function-built torch policies, as `TorchPolicy` subclasses.

RLlib 1.13 built most policies from functions (`loss_fn`, `stats_fn`, `postprocess_fn`,
...). corral's policies are classes, so the template turns each function into the method
it stands for on a subclass of `TorchPolicy` (or of the class `with_updates` was called on):

- `loss_fn(policy, model, dist_class, train_batch) -> loss` -> `loss()` (it may return a
  bare tensor: the learner then takes its stats from `extra_grad_info()`);
- `stats_fn(policy, train_batch) -> dict` -> `extra_grad_info()` (default: the means of
  `model.tower_stats`);
- `postprocess_fn(policy, sample_batch, other_agent_batches, episode)` ->
  `postprocess_trajectory()` (called once per trajectory);
- `optimizer_fn(policy, config)` -> `make_optimizer()`;
- `make_model(policy, obs_space, action_space, config)` -> the policy's model;
- `get_default_config()` -> defaults under the config the policy gets;
- `validate_spaces`, `before_init`, `before_loss_init`, `after_init` run at those points of
  `__init__` (each as `fn(policy, obs_space, action_space, config)`);
- `mixins` are put before the base class (their `__init__` is not called; do it in
  `before_loss_init`, as RLlib 1.13's own policies did).

RLlib's other hooks (`action_sampler_fn`, `action_distribution_fn`, `extra_action_out_fn`,
custom gradient functions, ...) are not built and raise `NotImplementedError` when given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from corral.policy.torch_policy import TorchPolicy

_BUILT_HOOKS = (
    "loss_fn",
    "get_default_config",
    "stats_fn",
    "postprocess_fn",
    "optimizer_fn",
    "validate_spaces",
    "before_init",
    "before_loss_init",
    "after_init",
    "make_model",
    "mixins",
)
_NOT_BUILT_HOOKS = (
    "extra_action_out_fn",
    "extra_grad_process_fn",
    "extra_learn_fetches_fn",
    "_after_loss_init",
    "action_sampler_fn",
    "action_distribution_fn",
    "make_model_and_action_dist",
    "compute_gradients_fn",
    "apply_gradients_fn",
    "get_batch_divisibility_req",
)


def build_policy_class(
    name: str,
    framework: str,
    *,
    loss_fn: Callable | None = None,
    get_default_config: Callable[[], dict] | None = None,
    stats_fn: Callable | None = None,
    postprocess_fn: Callable | None = None,
    optimizer_fn: Callable | None = None,
    validate_spaces: Callable | None = None,
    before_init: Callable | None = None,
    before_loss_init: Callable | None = None,
    after_init: Callable | None = None,
    make_model: Callable | None = None,
    mixins: list[type] | None = None,
    _base: type[TorchPolicy] | None = None,
    **not_built: Any,
) -> type:
    """A torch policy class named `name` whose methods are the given functions.

    Args:
        name: the class name.
        framework: "torch" (corral has no TensorFlow or JAX policies).
        loss_fn: `fn(policy, model, dist_class, train_batch) -> loss tensor` (or a
            list of them, summed; or `(loss, stats)`). Required unless the base
            class has a loss.
        get_default_config: `fn() -> dict` of defaults the policy's config is merged
            over.
        stats_fn: `fn(policy, train_batch) -> dict` of learner stats.
        postprocess_fn: `fn(policy, sample_batch, other_agent_batches=None,
            episode=None) -> sample_batch`.
        optimizer_fn: `fn(policy, config) -> torch optimizer`.
        validate_spaces: `fn(policy, obs_space, action_space, config)`, run first,
            before the base class's `__init__`.
        before_init: the same signature, run next, before the base's `__init__`.
        before_loss_init: the same signature, run after the base's `__init__`.
        after_init: the same signature, run last.
        make_model: `fn(policy, obs_space, action_space, config) -> model`.
        mixins: classes put before the base in the new class's bases.
        _base: the class to extend (`TorchPolicy`; `with_updates` passes its own).
        **not_built: RLlib's other hooks; any of them set raises NotImplementedError.

    Returns:
        The new policy class; its `with_updates(**overrides)` builds a variant.
    """
    if framework != "torch":
        raise ValueError(
            f"build_policy_class(name={name!r}, framework={framework!r}): corral builds "
            "torch policies only (framework='torch')."
        )
    unknown = [k for k in not_built if k not in _NOT_BUILT_HOOKS]
    if unknown:
        raise TypeError(f"build_policy_class() got unexpected keyword arguments {unknown}.")
    given = [k for k, v in not_built.items() if v is not None]
    if given:
        raise NotImplementedError(
            f"build_policy_class(name={name!r}): the hooks {given} are not built in corral; "
            f"the built ones are {list(_BUILT_HOOKS)}."
        )
    base: type[TorchPolicy] = _base or TorchPolicy
    if loss_fn is None and base.loss is TorchPolicy.loss:
        raise ValueError(f"build_policy_class(name={name!r}) needs a `loss_fn`.")
    original_kwargs = {
        "name": name,
        "framework": framework,
        "loss_fn": loss_fn,
        "get_default_config": get_default_config,
        "stats_fn": stats_fn,
        "postprocess_fn": postprocess_fn,
        "optimizer_fn": optimizer_fn,
        "validate_spaces": validate_spaces,
        "before_init": before_init,
        "before_loss_init": before_loss_init,
        "after_init": after_init,
        "make_model": make_model,
        "mixins": mixins,
        "_base": _base,
    }

    def __init__(self, observation_space: Any, action_space: Any, config: dict) -> None:
        if get_default_config is not None:
            config = {**get_default_config(), **config}
        self.config = config
        self.observation_space, self.action_space = observation_space, action_space
        if validate_spaces is not None:
            validate_spaces(self, observation_space, action_space, config)
        if before_init is not None:
            before_init(self, observation_space, action_space, config)
        base.__init__(self, observation_space, action_space, config)  # type: ignore[misc]
        if before_loss_init is not None:
            before_loss_init(self, observation_space, action_space, config)
        if after_init is not None:
            after_init(self, observation_space, action_space, config)

    namespace: dict[str, Any] = {"__init__": __init__, "_template_kwargs": original_kwargs}
    if loss_fn is not None:
        namespace["loss"] = lambda self, model, dist_class, train_batch: loss_fn(
            self, model, dist_class, train_batch
        )
        # A user's loss may read any column (rewards, custom postprocessing columns).
        namespace["train_columns"] = None
    if stats_fn is not None:
        namespace["extra_grad_info"] = lambda self, train_batch: stats_fn(self, train_batch)
    if postprocess_fn is not None:

        def postprocess_trajectory(self, sample_batch, other_agent_batches=None, episode=None):
            return postprocess_fn(self, sample_batch, other_agent_batches, episode)

        namespace["postprocess_trajectory"] = postprocess_trajectory
        namespace["postprocess_batched"] = False
    if optimizer_fn is not None:
        namespace["make_optimizer"] = lambda self: optimizer_fn(self, self.config)
    if make_model is not None:
        namespace["make_model"] = lambda self, num_outputs: make_model(
            self, self.observation_space, self.action_space, self.config
        )
    if get_default_config is not None:
        namespace["get_default_config"] = staticmethod(get_default_config)

    def with_updates(**overrides: Any) -> type:
        """A variant of this class with some of its functions replaced."""
        return build_policy_class(**{**original_kwargs, **overrides})

    namespace["with_updates"] = staticmethod(with_updates)
    bases = (*(mixins or []), base)
    cls = type(name, bases, namespace)
    cls.__qualname__ = name
    return cls


def with_updates_of(cls: type, **overrides: Any) -> type:
    """`cls.with_updates(**overrides)` for a hand-written policy class: a subclass of
    `cls` with the given functions as its methods (see `build_policy_class`)."""
    name = overrides.pop("name", f"{cls.__name__}WithUpdates")
    overrides.pop("framework", None)
    return build_policy_class(name, "torch", _base=cls, **overrides)


def class_loss(
    cls: type[TorchPolicy], policy: Any, model: Any, dist_class: type, train_batch: Any
) -> Any:
    """`cls.loss` of `policy` in the form of RLlib 1.13's loss functions: the loss
    tensor, with the stats the class reports stored (detached) in `model.tower_stats`
    (where :func:`tower_stats` and the default `extra_grad_info` read them).

    The function forms of corral's policies (`actor_critic_loss`, `build_vtrace_loss`,
    ...) are this, called with their class: the class's own loss, not a copy, even on a
    `with_updates` subclass whose `loss` is the function that calls it.
    """
    loss, stats = cls.loss(policy, model, dist_class, train_batch)
    store_tower_stats(model, stats)
    return loss


def store_tower_stats(model: Any, stats: Mapping[str, Any]) -> None:
    """Keeps a loss's `stats` (tensors detached) in `model.tower_stats`, RLlib 1.13's
    place of them, where :func:`tower_stats` and the stats functions read them (a model
    without that dict keeps none)."""
    tower = getattr(model, "tower_stats", None)
    if isinstance(tower, dict):
        tower.update({k: v.detach() if torch.is_tensor(v) else v for k, v in stats.items()})


def tower_stats(policy: Any, train_batch: Any = None) -> dict[str, Any]:
    """The stats the last :func:`class_loss` call stored in `policy.model.tower_stats`
    (RLlib 1.13's stats functions read the same place)."""
    return dict(getattr(policy.model, "tower_stats", {}))


__all__ = ["build_policy_class", "class_loss", "store_tower_stats", "tower_stats"]
