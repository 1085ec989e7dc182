"""`build_trainer`: a Trainer class from a few functions, as RLlib 1.x built its algorithms.

An algorithm given this way is a default config, a policy class and one of

- `execution_plan(workers, config, **kwargs)`: the classic form, returning an
  iterator whose every item is the result dict of one training iteration, built from
  the operators of `corral.execution` (`ParallelRollouts`, `ConcatBatches`,
  `TrainOneStep`, `StandardMetricsReporting`, ...; see `Trainer.execution_plan`);
- `training_step(trainer)`: the newer form, one round of sampling and
  learning returning the learner info dict (see `Trainer.training_step`).

Everything else (evaluation, checkpoints, worker-failure recovery) comes from
`Trainer`. `with_updates(**overrides)` on the built class builds a variant.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from corral.agents.trainer import COMMON_CONFIG, Trainer
from corral.policy.policy import Policy

__all__ = ["build_trainer"]


def build_trainer(
    name: str,
    *,
    default_config: dict | None = None,
    validate_config: Callable[[dict], None] | None = None,
    default_policy: type[Policy] | None = None,
    get_policy_class: Callable[[dict], type[Policy] | None] | None = None,
    validate_env: Callable[[Any, Any], None] | None = None,
    before_init: Callable[[Trainer], None] | None = None,
    after_init: Callable[[Trainer], None] | None = None,
    before_evaluate_fn: Callable[[Trainer], None] | None = None,
    mixins: list[type] | None = None,
    execution_plan: Callable[..., Iterator[dict]] | None = None,
    training_step: Callable[[Trainer], dict] | None = None,
    allow_unknown_configs: bool = False,
    allow_unknown_subkeys: list[str] | None = None,
    override_all_subkeys_if_type_changes: list[str] | None = None,
) -> type[Trainer]:
    """Builds a `Trainer` subclass named `name`.

    Args:
        name: the trainer's name (results folders, `repr`, checkpoints).
        default_config: the algorithm's full default config (default: `COMMON_CONFIG`).
        validate_config: `fn(config)`, checks (and may complete) the merged config.
        default_policy: the policy class of policies whose spec names none.
        get_policy_class: `fn(config) -> policy class or None`; None falls back
            to `default_policy`.
        validate_env: `fn(env, env_context)`, run on every new (sub-)env.
        before_init / after_init: `fn(trainer)`, around building the workers.
        before_evaluate_fn: `fn(trainer)`, run before each evaluation.
        mixins: classes mixed in ahead of `Trainer` (their methods win).
        execution_plan: classic `fn(workers, config, **kwargs) -> iterator of results`.
        training_step: newer `fn(trainer) -> learner info dict`.
        allow_unknown_configs, allow_unknown_subkeys,
        override_all_subkeys_if_type_changes: config merging rules.

    Returns:
        The new class; its `with_updates(**overrides)` rebuilds it with
        some of these arguments changed.
    """
    if execution_plan is not None and training_step is not None:
        raise ValueError(
            f"build_trainer({name!r}): give `execution_plan` or `training_step`, not both."
        )
    arguments = dict(locals())
    base = Trainer
    subkeys = (
        base._allow_unknown_subkeys if allow_unknown_subkeys is None else allow_unknown_subkeys
    )
    override = (
        base._override_all_subkeys_if_type_changes
        if override_all_subkeys_if_type_changes is None
        else override_all_subkeys_if_type_changes
    )

    class BuiltTrainer(*(mixins or []), base):
        _name = name
        _default_config = default_config or COMMON_CONFIG
        _policy_class = default_policy
        _allow_unknown_configs = allow_unknown_configs
        _allow_unknown_subkeys = subkeys
        _override_all_subkeys_if_type_changes = override

        def setup(self, config: dict) -> None:
            if before_init is not None:
                before_init(self)
            super().setup(config)
            if after_init is not None:
                after_init(self)

        def validate_config(self, config: dict) -> None:
            super().validate_config(config)
            if validate_config is not None:
                validate_config(config)

        def get_default_policy_class(self, config: dict) -> type[Policy]:
            chosen = get_policy_class(config) if get_policy_class is not None else None
            return chosen or super().get_default_policy_class(config)

        @staticmethod
        def validate_env(env: Any, env_context: Any) -> None:
            if validate_env is not None:
                validate_env(env, env_context)

        def training_step(self) -> dict:
            if training_step is None:
                return super().training_step()
            return training_step(self)

        def _before_evaluate(self) -> None:
            if before_evaluate_fn is not None:
                before_evaluate_fn(self)

        @staticmethod
        def with_updates(**overrides: Any) -> type[Trainer]:
            """A copy of this trainer class with some `build_trainer` arguments replaced."""
            return build_trainer(**{**arguments, **overrides})

    if execution_plan is not None:
        # `Trainer` runs a plan of the class's own (see `corral.agents.trainer_plan`).
        BuiltTrainer.execution_plan = staticmethod(execution_plan)  # type: ignore[method-assign]
    BuiltTrainer.__name__ = BuiltTrainer.__qualname__ = name
    return BuiltTrainer
