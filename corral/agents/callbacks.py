"""User hooks into training and sampling (RLlib 1.x's `DefaultCallbacks`).

Subclass `DefaultCallbacks`, override the hooks you need and pass the class as
`config["callbacks"]`. Every hook takes keyword arguments only, plus `**kwargs` so
that hooks written today keep working when new arguments are added. To run several
callback classes, pass `MultiCallbacks([A, B])`.

The pre-1.0 form, a dict of hook name -> `fn(info_dict)`, still works (with a
deprecation warning) through `DefaultCallbacks(legacy_callbacks_dict=...)`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from corral.utils.deprecation import deprecation_warning

if TYPE_CHECKING:
    from corral.env.base_env import BaseEnv
    from corral.env.env_context import EnvContext
    from corral.evaluation.episode import Episode
    from corral.evaluation.rollout_worker import RolloutWorker
    from corral.policy.policy import Policy
    from corral.policy.sample_batch import SampleBatch

# Every hook a callbacks object can implement, in the order they fire in a run.
HOOK_NAMES: tuple[str, ...] = (
    "on_trainer_init",
    "on_sub_environment_created",
    "on_episode_start",
    "on_episode_step",
    "on_episode_end",
    "on_postprocess_trajectory",
    "on_sample_end",
    "on_learn_on_batch",
    "on_train_result",
)

# Hook name -> the key a legacy callbacks dict uses for it. Only these hooks existed
# in the dict interface (the trajectory hook had a shorter name there).
_LEGACY_NAMES: dict[str, str] = {
    "on_episode_start": "on_episode_start",
    "on_episode_step": "on_episode_step",
    "on_episode_end": "on_episode_end",
    "on_postprocess_trajectory": "on_postprocess_traj",
    "on_sample_end": "on_sample_end",
    "on_train_result": "on_train_result",
}


class _ClassOrInstanceMethod:
    """Descriptor binding a function to the instance when there is one, else to the class.

    Lets `overrides` answer both `MyCallbacks.overrides(hook)` (what the class does) and
    `callbacks.overrides(hook)` (what this object does, legacy dict included).
    """

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        self.__doc__ = func.__doc__

    def __get__(self, obj: Any, owner: type) -> Callable[..., Any]:
        target = owner if obj is None else obj
        return self.func.__get__(target, owner)


class DefaultCallbacks:
    """Base class for training callbacks; every hook is a no-op here.

    Hooks run in the process that does the work: episode, trajectory and sample hooks
    on the rollout worker, `on_learn_on_batch` where the policy learns, and
    `on_trainer_init` / `on_train_result` in the driver. A new instance is created per
    worker, so state kept on `self` is per process; use `episode.user_data` for data
    that belongs to one episode and `episode.custom_metrics` for metrics that should
    appear in the train results.
    """

    def __init__(self, legacy_callbacks_dict: dict[str, Callable[[dict], Any]] | None = None):
        """Callbacks, optionally through RLlib's deprecated dict interface.

        Args:
            legacy_callbacks_dict: the deprecated dict interface, mapping legacy hook
                names (e.g. "on_episode_end", "on_postprocess_traj") to functions taking
                one info dict.
        """
        if legacy_callbacks_dict:
            deprecation_warning(
                "callbacks dict interface",
                "a class extending corral.agents.callbacks.DefaultCallbacks",
            )
            unknown = sorted(set(legacy_callbacks_dict) - set(_LEGACY_NAMES.values()))
            if unknown:
                raise ValueError(
                    f"Unknown legacy callback name(s) {unknown}; the callbacks dict "
                    f"interface supports {sorted(_LEGACY_NAMES.values())}. For other hooks, "
                    "subclass DefaultCallbacks."
                )
        self.legacy_callbacks: dict[str, Callable[[dict], Any]] = dict(legacy_callbacks_dict or {})

    @_ClassOrInstanceMethod
    def overrides(self_or_cls, hook_name: str) -> bool:
        """Tell whether `hook_name` does anything beyond the base no-op.

        True when the class (or, called on an instance, the instance itself) replaces
        the hook, or when a legacy callbacks dict provides it. The sampler uses this to
        skip per-step calls that would do nothing.
        """
        if hook_name not in HOOK_NAMES:
            raise ValueError(f"Unknown callback hook {hook_name!r}; hooks are {list(HOOK_NAMES)}.")
        cls = self_or_cls if isinstance(self_or_cls, type) else type(self_or_cls)
        if getattr(cls, hook_name) is not getattr(DefaultCallbacks, hook_name):
            return True
        if isinstance(self_or_cls, type):
            return False
        if hook_name in vars(self_or_cls):
            return True
        legacy = getattr(self_or_cls, "legacy_callbacks", None) or {}
        return _LEGACY_NAMES.get(hook_name) in legacy

    def _call_legacy(self, hook_name: str, info: dict[str, Any]) -> None:
        # getattr: subclasses that skip `super().__init__()` have no legacy dict.
        legacy = getattr(self, "legacy_callbacks", None)
        fn = legacy.get(_LEGACY_NAMES[hook_name]) if legacy else None
        if fn is not None:
            fn(info)

    def on_trainer_init(self, *, trainer: Any, **kwargs: Any) -> None:
        """Run once at the end of `Trainer.setup()`, when workers and policies exist.

        Args:
            trainer: the trainer that was just built.
            kwargs: reserved for arguments added later.
        """

    def on_sub_environment_created(
        self,
        *,
        worker: RolloutWorker,
        sub_environment: Any,
        env_context: EnvContext,
        **kwargs: Any,
    ) -> None:
        """Run on a rollout worker right after it created one (sub-)environment.

        Args:
            worker: the rollout worker that owns the env.
            sub_environment: the env object just created (one of the vectorised
                copies when `num_envs_per_worker` > 1).
            env_context: the `EnvContext` the env was built with (its
                `worker_index` and `vector_index` say which copy this is).
            kwargs: reserved for arguments added later.
        """

    def on_episode_start(
        self,
        *,
        worker: RolloutWorker,
        base_env: BaseEnv,
        policies: dict[str, Policy],
        episode: Episode,
        **kwargs: Any,
    ) -> None:
        """Run on the rollout worker after an episode's env reset, before its first step.

        Args:
            worker: the rollout worker collecting the episode.
            base_env: the worker's (vectorised) env; the individual envs are
                available through `base_env.get_sub_environments()`.
            policies: policy id -> policy ("default_policy" only, in single-agent
                setups).
            episode: the new episode; put per-episode scratch data into
                `episode.user_data` and metrics into `episode.custom_metrics`.
            kwargs: reserved for arguments added later.
        """
        self._call_legacy(
            "on_episode_start", {"env": base_env, "policy": policies, "episode": episode}
        )

    def on_episode_step(
        self,
        *,
        worker: RolloutWorker,
        base_env: BaseEnv,
        policies: dict[str, Policy] | None = None,
        episode: Episode,
        **kwargs: Any,
    ) -> None:
        """Run on the rollout worker after every env step of an episode.

        Args:
            worker: the rollout worker collecting the episode.
            base_env: the worker's (vectorised) env.
            policies: policy id -> policy; may be omitted by the caller.
            episode: the running episode (see `on_episode_start`).
            kwargs: reserved for arguments added later.
        """
        self._call_legacy("on_episode_step", {"env": base_env, "episode": episode})

    def on_episode_end(
        self,
        *,
        worker: RolloutWorker,
        base_env: BaseEnv,
        policies: dict[str, Policy],
        episode: Episode,
        **kwargs: Any,
    ) -> None:
        """Run on the rollout worker once an episode has terminated or been truncated.

        This is the usual place to turn `episode.user_data` into
        `episode.custom_metrics`.

        Args:
            worker: the rollout worker that collected the episode.
            base_env: the worker's (vectorised) env.
            policies: policy id -> policy.
            episode: the finished episode.
            kwargs: reserved for arguments added later.
        """
        self._call_legacy(
            "on_episode_end", {"env": base_env, "policy": policies, "episode": episode}
        )

    def on_postprocess_trajectory(
        self,
        *,
        worker: RolloutWorker,
        episode: Episode,
        agent_id: Any,
        policy_id: str,
        policies: dict[str, Policy],
        postprocessed_batch: SampleBatch,
        original_batches: dict[Any, SampleBatch],
        **kwargs: Any,
    ) -> None:
        """Run right after a policy postprocessed one agent's trajectory (e.g. GAE).

        Edit `postprocessed_batch` in place to add your own postprocessing; in
        multi-agent setups `original_batches` shows what the other agents did.

        Args:
            worker: the rollout worker that collected the trajectory.
            episode: the episode the trajectory belongs to.
            agent_id: the agent whose trajectory this is.
            policy_id: the policy that agent is mapped to.
            policies: policy id -> policy.
            postprocessed_batch: the agent's trajectory after postprocessing
                (mutable).
            original_batches: agent id -> trajectory before postprocessing
                (read-only).
            kwargs: reserved for arguments added later.
        """
        self._call_legacy(
            "on_postprocess_trajectory",
            {
                "episode": episode,
                "agent_id": agent_id,
                "pre_batch": (original_batches or {}).get(agent_id),
                "post_batch": postprocessed_batch,
                "all_pre_batches": original_batches,
            },
        )

    def on_sample_end(self, *, worker: RolloutWorker, samples: SampleBatch, **kwargs: Any) -> None:
        """Run at the end of `RolloutWorker.sample()`, before the batch is returned.

        Args:
            worker: the rollout worker that sampled.
            samples: the batch about to be returned (mutable).
            kwargs: reserved for arguments added later.
        """
        self._call_legacy("on_sample_end", {"worker": worker, "samples": samples})

    def on_learn_on_batch(
        self, *, policy: Policy, train_batch: SampleBatch, result: dict, **kwargs: Any
    ) -> None:
        """Run at the start of `Policy.learn_on_batch()`, before any sequence padding.

        Args:
            policy: the policy about to learn.
            train_batch: the batch it will learn on (mutable).
            result: the learn result dict; add custom stats to it.
            kwargs: reserved for arguments added later.
        """

    def on_train_result(self, *, trainer: Any, result: dict, **kwargs: Any) -> None:
        """Run in the driver at the end of each `Trainer.train()` call.

        Args:
            trainer: the trainer that just finished an iteration.
            result: that iteration's result dict; add or change metrics in place.
            kwargs: reserved for arguments added later.
        """
        self._call_legacy("on_train_result", {"trainer": trainer, "result": result})


CallbacksFactory = Callable[[], DefaultCallbacks]


class MultiCallbacks(DefaultCallbacks):
    """Several callbacks classes run as one, each hook calling them in list order.

    `MultiCallbacks([A, B])` goes where a callbacks class goes
    (`config["callbacks"] = MultiCallbacks([A, B])`): calling it, as the trainer and
    every worker do, returns a new `MultiCallbacks` holding fresh `A()` and `B()`
    instances, so no two workers share state.
    """

    def __init__(self, callback_class_list: Iterable[CallbacksFactory]):
        """Several callbacks objects called in turn.

        Args:
            callback_class_list: `DefaultCallbacks` subclasses, or any zero-argument
                callables returning a callbacks object.
        """
        super().__init__()
        self._callback_class_list: list[CallbacksFactory] = list(callback_class_list)
        for factory in self._callback_class_list:
            if not callable(factory):
                raise ValueError(
                    "MultiCallbacks takes a list of callbacks classes (or factories), "
                    f"got {factory!r}."
                )
        self._callback_list: list[DefaultCallbacks] = [f() for f in self._callback_class_list]

    def __call__(self, *args: Any, **kwargs: Any) -> MultiCallbacks:
        return type(self)(self._callback_class_list)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickle the recipe, not the instances: a worker process rebuilds its own.
        return (type(self), (self._callback_class_list,))

    @_ClassOrInstanceMethod
    def overrides(self_or_cls, hook_name: str) -> bool:
        """True when any of the wrapped callbacks does something in `hook_name`."""
        if isinstance(self_or_cls, type):
            # The class forwards every hook; only an instance knows what it wraps.
            return DefaultCallbacks.overrides.__func__(self_or_cls, hook_name)
        return any(cb.overrides(hook_name) for cb in self_or_cls._callback_list)

    def on_trainer_init(self, *, trainer: Any, **kwargs: Any) -> None:
        for cb in self._callback_list:
            cb.on_trainer_init(trainer=trainer, **kwargs)

    def on_sub_environment_created(
        self,
        *,
        worker: RolloutWorker,
        sub_environment: Any,
        env_context: EnvContext,
        **kwargs: Any,
    ) -> None:
        for cb in self._callback_list:
            cb.on_sub_environment_created(
                worker=worker, sub_environment=sub_environment, env_context=env_context, **kwargs
            )

    def on_episode_start(
        self,
        *,
        worker: RolloutWorker,
        base_env: BaseEnv,
        policies: dict[str, Policy],
        episode: Episode,
        **kwargs: Any,
    ) -> None:
        for cb in self._callback_list:
            cb.on_episode_start(
                worker=worker, base_env=base_env, policies=policies, episode=episode, **kwargs
            )

    def on_episode_step(
        self,
        *,
        worker: RolloutWorker,
        base_env: BaseEnv,
        policies: dict[str, Policy] | None = None,
        episode: Episode,
        **kwargs: Any,
    ) -> None:
        for cb in self._callback_list:
            cb.on_episode_step(
                worker=worker, base_env=base_env, policies=policies, episode=episode, **kwargs
            )

    def on_episode_end(
        self,
        *,
        worker: RolloutWorker,
        base_env: BaseEnv,
        policies: dict[str, Policy],
        episode: Episode,
        **kwargs: Any,
    ) -> None:
        for cb in self._callback_list:
            cb.on_episode_end(
                worker=worker, base_env=base_env, policies=policies, episode=episode, **kwargs
            )

    def on_postprocess_trajectory(
        self,
        *,
        worker: RolloutWorker,
        episode: Episode,
        agent_id: Any,
        policy_id: str,
        policies: dict[str, Policy],
        postprocessed_batch: SampleBatch,
        original_batches: dict[Any, SampleBatch],
        **kwargs: Any,
    ) -> None:
        for cb in self._callback_list:
            cb.on_postprocess_trajectory(
                worker=worker,
                episode=episode,
                agent_id=agent_id,
                policy_id=policy_id,
                policies=policies,
                postprocessed_batch=postprocessed_batch,
                original_batches=original_batches,
                **kwargs,
            )

    def on_sample_end(self, *, worker: RolloutWorker, samples: SampleBatch, **kwargs: Any) -> None:
        for cb in self._callback_list:
            cb.on_sample_end(worker=worker, samples=samples, **kwargs)

    def on_learn_on_batch(
        self, *, policy: Policy, train_batch: SampleBatch, result: dict, **kwargs: Any
    ) -> None:
        for cb in self._callback_list:
            cb.on_learn_on_batch(policy=policy, train_batch=train_batch, result=result, **kwargs)

    def on_train_result(self, *, trainer: Any, result: dict, **kwargs: Any) -> None:
        for cb in self._callback_list:
            cb.on_train_result(trainer=trainer, result=result, **kwargs)


def make_callbacks(factory: Any) -> DefaultCallbacks:
    """The callbacks object of a config's `callbacks` (a `DefaultCallbacks` subclass,
    `MultiCallbacks([...])` or any factory returning a `DefaultCallbacks`).

    Raises:
        ValueError: `factory` is not callable.
        TypeError: calling it returned something other than a `DefaultCallbacks`.
    """
    if not callable(factory):
        raise ValueError(
            "`callbacks` must be a callable that returns a DefaultCallbacks subclass "
            f"instance, got {factory!r}"
        )
    callbacks = factory()
    if not isinstance(callbacks, DefaultCallbacks):
        raise TypeError(
            "`callbacks` must be a DefaultCallbacks subclass (or a factory returning an "
            f"instance of one); calling {factory!r} returned {callbacks!r}."
        )
    return callbacks


class MemoryTrackingCallbacks(DefaultCallbacks):
    """RLlib 1.13's memory tracer (for debugging: ``tracemalloc`` slows execution down).

    At each episode end it adds to ``episode.custom_metrics`` the sizes and counts of the
    10 source lines that allocated most (``tracemalloc/<trace>/size``, ``.../count``) and
    the worker process' memory (``tracemalloc/worker/rss``, ``data``, ``vms``; these need
    ``psutil``).
    """

    def __init__(self, legacy_callbacks_dict: dict[str, Callable] | None = None) -> None:
        super().__init__(legacy_callbacks_dict)
        import tracemalloc

        # Keep 10 frames per allocation so the traces say where memory is allocated.
        tracemalloc.start(10)

    def on_episode_end(
        self,
        *,
        worker: RolloutWorker,
        base_env: BaseEnv,
        policies: dict[str, Policy],
        episode: Episode,
        **kwargs: Any,
    ) -> None:
        import os
        import tracemalloc

        for stat in tracemalloc.take_snapshot().statistics("lineno")[:10]:
            trace = str(stat.traceback)
            episode.custom_metrics[f"tracemalloc/{trace}/size"] = stat.size
            episode.custom_metrics[f"tracemalloc/{trace}/count"] = stat.count
        try:
            import psutil
        except ImportError:
            return
        info = psutil.Process(os.getpid()).memory_info()
        episode.custom_metrics["tracemalloc/worker/rss"] = info.rss
        episode.custom_metrics["tracemalloc/worker/data"] = getattr(info, "data", 0)
        episode.custom_metrics["tracemalloc/worker/vms"] = info.vms


class RE3UpdateCallbacks(DefaultCallbacks):
    """Adds RE3's state-entropy rewards to each train batch (RLlib 1.13's).

    Goes with `exploration_config={"type": "RE3", ...}`, which stores the observations'
    random-encoder embeddings in the batches' `"obs_embeds"` column. In
    `on_learn_on_batch` each row's distance to its `k_nn`-th nearest neighbour among the
    batch's embeddings, normalised by the running std (`MovingMeanStd`) and
    log-compressed, times `beta` at the current training iteration, is added to the
    rewards (and to the advantages and value targets when the batch has them, as for
    PPO). See `corral.utils.exploration.random_encoder`.

    The training iteration for the `beta` schedule is kept on the class
    (`RE3UpdateCallbacks._step`, set by `on_train_result` in the driver), as in RLlib.
    """

    _step = 0

    def __init__(
        self,
        *args: Any,
        embeds_dim: int = 128,
        k_nn: int = 50,
        beta: float = 0.1,
        rho: float = 0.0001,
        beta_schedule: str = "constant",
        **kwargs: Any,
    ) -> None:
        """RE3's reward settings (pass them with `functools.partial` or a subclass).

        Args:
            *args: `DefaultCallbacks`' arguments.
            embeds_dim: the embedding size (the RE3 exploration's `embeds_dim`).
            k_nn: which nearest neighbour the entropy estimate uses.
            beta: the intrinsic reward's initial weight.
            rho: the decay rate of "linear_decay".
            beta_schedule: "constant" or "linear_decay" (`beta * (1 - rho)^iteration`).
            **kwargs: `DefaultCallbacks`' keyword arguments.

        Raises:
            ValueError: a bad argument, named.
        """
        from corral.utils.exploration.random_encoder import (
            BETA_SCHEDULES,
            MovingMeanStd,
            check_re3_args,
        )

        check_re3_args(embeds_dim=embeds_dim, k_nn=k_nn, beta=beta, rho=rho)
        if beta_schedule not in BETA_SCHEDULES:
            raise ValueError(
                f"RE3UpdateCallbacks beta_schedule={beta_schedule!r}: expected one of "
                f"{list(BETA_SCHEDULES)}."
            )
        self.embeds_dim = int(embeds_dim)
        self.k_nn = int(k_nn)
        self.beta = float(beta)
        self.rho = float(rho)
        self.beta_schedule = beta_schedule
        self._rms = MovingMeanStd()
        super().__init__(*args, **kwargs)

    def on_learn_on_batch(
        self, *, policy: Policy, train_batch: SampleBatch, result: dict, **kwargs: Any
    ) -> None:
        super().on_learn_on_batch(policy=policy, train_batch=train_batch, result=result, **kwargs)
        import numpy as np

        from corral.utils.exploration.random_encoder import (
            OBS_EMBEDS,
            compute_states_entropy,
            update_beta,
        )

        if OBS_EMBEDS not in train_batch:
            raise ValueError(
                f"RE3UpdateCallbacks: the train batch has no {OBS_EMBEDS!r} column; use it "
                "with exploration_config={'type': 'RE3', ...}, which adds the embeddings."
            )
        embeds = np.asarray(train_batch[OBS_EMBEDS])
        entropy = compute_states_entropy(embeds, self.embeds_dim, self.k_nn)
        weight = update_beta(self.beta_schedule, self.beta, self.rho, RE3UpdateCallbacks._step)
        bonus = weight * np.reshape(self._rms(entropy), embeds.shape[:-1])
        for column in ("rewards", "advantages", "value_targets"):
            if column in train_batch:
                values = np.asarray(train_batch[column])
                train_batch[column] = (values + bonus).astype(values.dtype, copy=False)

    def on_train_result(self, *, trainer: Any, result: dict, **kwargs: Any) -> None:
        RE3UpdateCallbacks._step = int(result["training_iteration"])
        super().on_train_result(trainer=trainer, result=result, **kwargs)
