"""`TorchPolicy`: a policy whose model is a torch module.

Acting goes through `compute_actions_from_obs`, the sampler's fast path: one
batched forward pass under `torch.inference_mode()` that returns actions,
their log-probabilities, the distribution inputs and value estimates as
numpy arrays. Learning goes through `loss`, which algorithms implement and a
`Learner` calls once per minibatch.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch

from corral.models import MODEL_DEFAULTS, ModelCatalog
from corral.models.preprocessors import preprocessor_for_space
from corral.models.torch.torch_action_dist import TorchCategorical
from corral.models.torch.torch_modelv2 import TorchModelV2
from corral.policy.policy import Policy, nests_actions, with_model_flags
from corral.policy.sample_batch import SampleBatch, map_column
from corral.policy.view_requirement import declared_views, next_step_inputs
from corral.utils.exploration import (
    EpsilonGreedy,
    Exploration,
    StochasticSampling,
    make_exploration,
)
from corral.utils.exploration.exploration import overrides
from corral.utils.keyword_aliases import keyword_aliases
from corral.utils.schedules import make_schedule
from corral.utils.spaces import (
    flatten_action_rows,
    flatten_actions,
    is_int_box,
    is_nested_action,
    nest_action_rows,
    unflatten_actions,
)
from corral.utils.spaces.space_utils import normalize_action
from corral.utils.torch_utils import make_adam

if TYPE_CHECKING:
    from corral.core.learner import Learner

TensorDict = dict[str, torch.Tensor]

# The id of a policy in the `Learner` of its own updates (see `_own_learner`).
_OWN_ID = "default_policy"


class DirectStepOptimizer:
    """RLlib 1.13's marker for `apply_gradients`: step the optimisers with the gradients
    already on the parameters (what a `build_policy_class` policy's `learn_on_batch` does
    after computing them; an `apply_gradients_fn` receives it then)."""


_directStepOptimizerSingleton = DirectStepOptimizer()


def default_path_hook(method: Callable[..., Any]) -> Callable[..., Any]:
    """Marks an RLlib 1.13 override point (`extra_action_out`, `extra_grad_process`,
    `extra_compute_grad_fetches`) whose work the class's own code path already does (e.g.
    PPO's `vf_preds`, fetched by TorchPolicy's fast acting path): the class keeps that
    path. A subclass overriding the method with an unmarked one goes through the hooked
    path that calls it (see `corral.policy.policy_template.wire_override_points`), where
    `super()` reaches the marked one."""
    method.default_path_hook = True  # type: ignore[attr-defined]
    return method


def overrides_hook(cls: type, name: str) -> bool:
    """Whether `cls`'s method `name` is an override of RLlib 1.13's hook, not one marked
    with `default_path_hook` (TorchPolicy's own defaults are)."""
    return not getattr(getattr(cls, name, None), "default_path_hook", False)


def batch_divisibility_req_of(policy: Any, req: int | Callable[[Any], int]) -> int:
    """RLlib 1.13's `get_batch_divisibility_req` of `policy` (an int, or `fn(policy) ->
    int`, called here): the row count its train batches must be a multiple of.

    Raises:
        ValueError: it is (or returned) not an int >= 1.
    """
    value = req(policy) if callable(req) else req
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(
            f"{type(policy).__name__}: get_batch_divisibility_req "
            f"{'returned ' if callable(req) else '= '}{value!r}; expected an int >= 1 (rows "
            "a train batch must be a multiple of)."
        )
    return int(value)


def with_learn_fetches(policy: Any, info: dict[str, Any]) -> dict[str, Any]:
    """`info` (a `learn_on_batch` / `compute_gradients` info, or a trainer's learner info
    of the policy) with the policy's `extra_compute_grad_fetches()` beside its keys, as
    RLlib 1.13 added them (numpy; `info`'s own `learner_stats` win)."""
    from corral.utils.numpy import convert_to_numpy

    fetches = convert_to_numpy(dict(policy.extra_compute_grad_fetches() or {}))
    return {**fetches, **info}


class TorchPolicy(Policy):
    """A policy with a torch model built by `ModelCatalog` from `config["model"]`."""

    postprocess_batched = True
    # Whether this class's model takes the env's observations unpreprocessed
    # (`_disable_preprocessor_api`). None: where the model comes from `make_model` as
    # TorchPolicy builds it (the catalog's, for the env's observation space), which
    # receives them so; a class building its own model on the flattened observations
    # refuses the setting, unless it sets this True.
    raw_observations_built: bool | None = None
    # Whether this class's loss takes the nested actions of a Tuple/Dict action space
    # (`_disable_action_flattening`; `dist.logp` takes them either way).
    nested_actions_built: bool = True
    # RLlib 1.13's divisibility requirement of train batches (`get_batch_divisibility_req`
    # of `build_policy_class`; 1: none).
    batch_divisibility_req: int = 1
    # Decided per class at its creation (`__init_subclass__`): whether its learner step
    # runs `extra_grad_process` after the backward pass (in place of the `grad_clip`
    # clipping), and whether its learner info has `extra_compute_grad_fetches()` added.
    _processes_grads: bool = False
    _learn_fetches: bool = False

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        config: dict,
        *,
        model: TorchModelV2 | None = None,
        loss: Callable[..., Any] | None = None,
        action_distribution_class: type | None = None,
        action_sampler_fn: Callable[..., Any] | None = None,
        action_distribution_fn: Callable[..., Any] | None = None,
        max_seq_len: int | None = None,
        get_batch_divisibility_req: int | Callable[[Any], int] | None = None,
    ) -> None:
        """Builds the policy: its model (the catalog's for `config["model"]`, unless
        `model` is given), action distribution class, exploration and preprocessor.

        The keyword arguments are RLlib 1.13's, for subclasses that build their own
        model and loss (`TorchPolicy.__init__(self, obs_space, action_space, config,
        model=model, loss=loss_fn, action_distribution_class=dist_class)`):

        Args:
            observation_space: the env's observation space.
            action_space: the env's action space.
            config: the policy's config (a trainer's, with `model`, `lr`, ...).
            model: the policy's model (a `TorchModelV2`, e.g. from
                `ModelCatalog.get_model_v2`), used instead of the catalog's; it needs
                `action_distribution_class`, unless `action_sampler_fn` or
                `action_distribution_fn` gives the actions.
            loss: `fn(policy, model, dist_class, train_batch) -> loss tensor` (or a list
                of them, summed), the policy's `loss` (as `build_policy_class`'s
                `loss_fn`; its stats come from `extra_grad_info`); default: the class's
                `loss` method.
            action_distribution_class: the action distribution class (a
                `TorchDistributionWrapper`); default: the catalog's for `action_space`.
            action_sampler_fn: `fn(policy, model, input_dict, state_batches, explore=,
                timestep=) -> (actions, logp, state_out)` or `(actions, logp,
                dist_inputs, state_out)`: acting without the distribution and the
                exploration (see `corral.policy.policy_template`).
            action_distribution_fn: `fn(policy, model, input_dict=, state_batches=,
                seq_lens=, explore=, timestep=, is_training=) -> (dist_inputs,
                dist_class, state_out)`: acting through it instead of the model call; the
                exploration picks from `dist_class(dist_inputs, model)`.
            max_seq_len: the longest sequence a recurrent model trains on; default: the
                model config's `max_seq_len` (20, RLlib 1.13's default here), which it
                replaces in the policy's config.
            get_batch_divisibility_req: an int, or `fn(policy) -> int` called at the end of
                `__init__`: the policy's `batch_divisibility_req` (train batches are
                padded to whole chunks of that many rows); default 1.

        Raises:
            ValueError: `model` without `action_distribution_class` and without an
                acting function, both acting functions, or a bad `max_seq_len` /
                `get_batch_divisibility_req`.
        """
        name = type(self).__name__
        if action_sampler_fn is not None and action_distribution_fn is not None:
            raise ValueError(
                f"{name}: give TorchPolicy.__init__ an action_sampler_fn or an "
                "action_distribution_fn, not both (the sampler would replace the "
                "distribution function's model call and exploration)."
            )
        if (
            model is not None
            and action_distribution_class is None
            and action_sampler_fn is None
            and action_distribution_fn is None
        ):
            raise ValueError(
                f"{name}: TorchPolicy.__init__ got a model ({type(model).__name__}) but no "
                "action_distribution_class; pass the class (e.g. the first item of "
                "ModelCatalog.get_action_dist(action_space, config['model'], "
                "framework='torch')), or an action_sampler_fn / action_distribution_fn."
            )
        if max_seq_len is not None:
            if isinstance(max_seq_len, bool) or not isinstance(max_seq_len, int | np.integer):
                raise ValueError(
                    f"{name}: max_seq_len={max_seq_len!r}; expected an int >= 1 (the longest "
                    "training sequence of a recurrent model)."
                )
            if max_seq_len < 1:
                raise ValueError(f"{name}: max_seq_len={max_seq_len}; expected an int >= 1.")
            # (The learner cuts a recurrent policy's sequences at its config's value.)
            config = {**config, "model": {**config["model"], "max_seq_len": int(max_seq_len)}}
        config = with_model_flags(config)
        super().__init__(observation_space, action_space, config)
        # `_disable_preprocessor_api`: the model is built for the env's observation space
        # and is called with the observations as the env gave them (`TorchModelV2` turns
        # the flat rows the sampler keeps back into them).
        self.raw_obs_model = bool(config.get("_disable_preprocessor_api"))
        if self.raw_obs_model:
            self._check_raw_observations_built(own_model=model is not None)
        if nests_actions(self) and not type(self).nested_actions_built:
            raise NotImplementedError(
                f"_disable_action_flattening=True: {type(self).__name__} reads its "
                f"{action_space} actions as flat rows; set it to False."
            )
        # RLlib's `self._lock` (what `corral.utils.threading.with_lock` takes). A model
        # call and the `value_function()` read of what it cached are one step under it, so
        # that acting beside an asynchronous algorithm's learner thread (IMPALA, APPO with
        # the local worker sampling) never mixes one call's rows into the other's values.
        # The built-in models' fast paths cache nothing and take no lock.
        self._lock = threading.RLock()
        self.preprocessor = preprocessor_for_space(observation_space, config.get("model"))
        # RLlib's `policy.device`: the CPU, unless `to_device` moved the policy (a rollout
        # worker with `num_gpus_per_worker`); learners train copies on their own device.
        self.device = torch.device("cpu")
        # True once `to_device` ran: acting moves inputs there and results back.
        self._device_inference = False
        self.model: TorchModelV2
        if model is None:
            self.dist_class, num_outputs = ModelCatalog.get_action_dist(
                action_space, config["model"], framework="torch"
            )
            self.model = self.make_model(num_outputs)
            if action_distribution_class is not None:
                self.dist_class = action_distribution_class
        else:
            self.dist_class = action_distribution_class
            self.model = model
        # RLlib 1.13's attributes: the longest training sequence and the acting functions.
        self.max_seq_len = int(config["model"].get("max_seq_len", MODEL_DEFAULTS["max_seq_len"]))
        self.action_sampler_fn = action_sampler_fn
        self.action_distribution_fn = action_distribution_fn
        # RLlib 1.13's per-tower loss terms (`model.tower_stats["policy_loss"] = ...`),
        # which RLlib-style losses fill and `extra_grad_info` reports.
        if not hasattr(self.model, "tower_stats"):
            vars(self.model)["tower_stats"] = {}  # a plain attribute, not a buffer
        # The model's own `forward_inference` (the built-in models' fast path) is only
        # taken while it computes what `forward` / `value_function` would: a subclass
        # overriding either of them goes through the module call.
        self._fast_forward = _fast_forward_of(self.model)
        # Values alone (bootstrapping a cut trajectory): the value branch only.
        self._fast_value = _fast_forward_of(self.model, "value_only")
        self._fast_rnn_step = _fast_forward_of(
            self.model,
            "forward_inference_rnn",
            ("forward", "forward_rnn", "rnn_inputs", "value_function"),
        )
        self._initial_state = [
            np.asarray(s, np.float32) for s in self.model.get_initial_state() or []
        ]
        self.exploration = self.make_exploration()
        # Acting wholly in numpy, without tensors (the DQN family's sampling): Q-values
        # from the built-in model's `forward_inference_numpy`, actions from EpsilonGreedy's
        # own choice on them. Each torch op on the sampler's one or few rows costs more
        # than its arithmetic, and more so right after a gradient step (which evicts the
        # acting code from the caches): DQN's one-step training loop saves 46-80 us per
        # env step (BENCHMARKS.md).
        numpy_forward = _fast_forward_of(self.model, "forward_inference_numpy")
        exploration = self.exploration
        self._numpy_acting: tuple[Callable[..., Any], Callable[..., Any]] | None = None
        if (
            numpy_forward is not None
            and not self._initial_state
            and isinstance(exploration, EpsilonGreedy)
            and type(exploration).get_exploration_action is EpsilonGreedy.get_exploration_action
            and self.dist_class is TorchCategorical
        ):
            self._numpy_acting = (numpy_forward, exploration.get_exploration_action_numpy)
        self._init_action_bounds(action_space)
        # RLlib 1.13: the model's view requirements are the policy's; extra view columns
        # reach the model at acting (`view_inputs`) and training time (train_columns).
        self.view_requirements.update(getattr(self.model, "view_requirements", None) or {})
        views = tuple(declared_views(self.view_requirements))
        columns = getattr(self, "train_columns", None)
        if views and columns is not None:
            self.train_columns = (*columns, *views)
        if loss is not None or action_sampler_fn or action_distribution_fn:
            # (Per policy: instances built without them keep their class's methods.)
            from corral.policy.policy_template import bind_policy_functions

            bind_policy_functions(self, loss, action_sampler_fn, action_distribution_fn)
        if get_batch_divisibility_req is not None:
            self.batch_divisibility_req = batch_divisibility_req_of(
                self, get_batch_divisibility_req
            )
        self._check_model_forward()

    # -- construction -------------------------------------------------------

    def _check_model_forward(self, batch_size: int = 4) -> None:
        """RLlib 1.13's check of a custom model's `forward` at policy construction: one
        acting call on an all-zero dummy batch (`_get_dummy_batch_from_view_requirements`),
        whose result must be `(outputs, state_out)` with `state_out` a list
        (`checked_forward_result`, as `ModelV2.__call__` checks it; a `TorchModelV2` is
        called through `nn.Module.__call__`, which checks nothing).

        Only a user's model is checked (its `forward`, or a `RecurrentNetwork`'s
        `forward_rnn`, defined outside corral), and only where the policy acts through
        the model call (not an `action_sampler_fn` / `action_distribution_fn`). The call
        runs in eval mode with torch's RNG state restored after it, so it moves no
        batch-norm statistics and no seeded results. A model that cannot act on the dummy
        batch at all is left to fail where it is really called (with its own error), as
        before.

        Raises:
            ValueError: the model's `forward` returned something else.
        """
        from corral.models.modelv2 import checked_forward_result
        from corral.policy.policy_template import _corral_own

        model = getattr(self, "model", None)
        # (A `RecurrentNetwork` of one's own defines `forward_rnn`; corral's `forward`
        # passes its result on.)
        user_code = [getattr(type(model), name, None) for name in ("forward", "forward_rnn")]
        if (
            not isinstance(model, torch.nn.Module)
            or all(f is None or _corral_own(f) for f in user_code)
            or getattr(self.compute_actions_from_obs, "acting_hooks", False)
        ):
            return
        bad: list[ValueError] = []

        def check(module: torch.nn.Module, args: Any, result: Any) -> None:
            try:
                checked_forward_result(result)
            except ValueError as e:
                bad.append(ValueError(f"Custom model {type(module).__name__}: {e}"))
                raise bad[-1] from None

        modes = [(m, m.training) for m in model.modules()]
        handle = model.register_forward_hook(check)
        try:
            with torch.random.fork_rng(devices=[]), torch.inference_mode():
                model.eval()
                self._dummy_acting_call(batch_size)
        except Exception as e:  # noqa: BLE001 (only the check's own error counts here)
            if bad and e is bad[-1]:
                raise
        finally:
            handle.remove()
            for module, training in modes:
                module.training = training

    def _dummy_acting_call(self, batch_size: int) -> None:
        """The model call of an acting step on an all-zero batch of `batch_size` rows (the
        policy's initial state for a recurrent model), through the acting code itself."""
        dummy = self._get_dummy_batch_from_view_requirements(batch_size)
        obs_space = self.preprocessor.observation_space
        obs = self._tensor(np.zeros((batch_size, *(obs_space.shape or ())), np.float32))
        with self._device_scope():
            if not self._initial_state:
                views = {k: dummy[k] for k in self._act_views() if k in dummy}
                self._forward_inference(obs, views)
                return
            state = [
                self._tensor(np.repeat(s[None], batch_size, axis=0)) for s in self._initial_state
            ]
            self._rnn_step_through_forward(
                obs,
                state,
                dummy.get(SampleBatch.PREV_ACTIONS),
                dummy.get(SampleBatch.PREV_REWARDS),
            )

    def make_model(self, num_outputs: int) -> TorchModelV2:
        """Builds this policy's model (override for algorithm-specific nets): for the
        preprocessed observations, or the env's own under `_disable_preprocessor_api`."""
        return ModelCatalog.get_model_v2(
            self.observation_space if self.raw_obs_model else self.preprocessor.observation_space,
            self.action_space,
            num_outputs,
            self.config["model"],
            framework="torch",
        )

    def _check_raw_observations_built(self, own_model: bool = False) -> None:
        """Refuses `_disable_preprocessor_api` where this class's model would not take
        the raw observations, and beside a `custom_preprocessor` (RLlib 1.13 uses no
        preprocessor at all then). `own_model`: the model was given to `__init__` (built
        by the caller for the policy's observation space, the env's)."""
        cls = type(self)
        built = cls.raw_observations_built
        if built is None:
            built = own_model or cls.make_model is TorchPolicy.make_model
        if not built:
            raise NotImplementedError(
                f"_disable_preprocessor_api=True: {cls.__name__} builds its own model for "
                "the flattened observations; it is built for the policies whose model the "
                "catalog makes (PPO, APPO, IMPALA, PG, A2C/A3C, MARWIL/BC). Set it to False "
                "(or set `raw_observations_built = True` on a policy class whose model takes "
                "unpreprocessed observations)."
            )
        if self.config["model"].get("custom_preprocessor"):
            raise ValueError(
                "_disable_preprocessor_api=True and model.custom_preprocessor="
                f"{self.config['model']['custom_preprocessor']!r} exclude each other: the "
                "model gets the env's observations unpreprocessed."
            )

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A subclass's own `optimizer()` (RLlib 1.13's override point) wins over a
        # `make_optimizer` it inherits (e.g. DQN's): the learner asks `make_optimizer`.
        if "optimizer" in cls.__dict__ and "make_optimizer" not in cls.__dict__:
            cls.make_optimizer = TorchPolicy.make_optimizer  # type: ignore[method-assign]
        # RLlib 1.13's other override points (`extra_action_out`, `extra_grad_process`,
        # `extra_compute_grad_fetches`): a class overriding one acts / learns through the
        # paths that call it, decided here; the others keep TorchPolicy's.
        from corral.policy.policy_template import wire_override_points

        wire_override_points(cls)

    def make_optimizer(self) -> torch.optim.Optimizer:
        """The optimiser a `Learner` uses for this policy: `optimizer()`'s (RLlib 1.13's
        override point; corral's own policies override this method instead).

        Raises:
            ValueError: an `optimizer()` override returned several optimisers (give each
                its loss through `make_optimizer` returning a dict of them instead).
        """
        chosen = self.optimizer()
        if isinstance(chosen, list | tuple):
            if len(chosen) != 1:
                raise ValueError(
                    f"{type(self).__name__}.optimizer() returned {len(chosen)} optimisers; "
                    "corral pairs several optimisers with their losses by name: override "
                    "make_optimizer() to return a dict of them (see SAC's)."
                )
            chosen = chosen[0]
        return chosen

    def optimizer(self) -> torch.optim.Optimizer | list[torch.optim.Optimizer]:
        """RLlib 1.13's `TorchPolicy.optimizer()`: Adam with `lr`; extra keyword arguments
        for it come from the `optimizer` config dict (e.g. `{"eps": 1e-5}`). The fused
        kernel is used unless that dict picks an implementation (`make_adam`). A subclass
        may override it (one optimiser) as in RLlib 1.x."""
        return make_adam(
            self.model.parameters(), self.config.get("optimizer"), lr=self.config["lr"]
        )

    def make_exploration(self) -> Exploration:
        """The `Exploration` described by `exploration_config` (see `corral.utils.exploration`).

        `worker_index` is set in the policy config by the rollout worker that
        builds this policy (0: the driver's).
        """
        exploration = make_exploration(
            self.config.get("exploration_config"),
            self.action_space,
            self.config,
            self.model,
            num_workers=int(self.config.get("num_workers", 0) or 0),
            worker_index=int(self.config.get("worker_index", 0) or 0),
        )
        # Plain sampling without random warm-up runs inline in
        # compute_actions_from_obs (the policy-gradient fast path).
        self._inline_sampling = (
            type(exploration) is StochasticSampling and exploration.random_timesteps == 0
        )
        # RLlib 1.13's `before_compute_actions` hook (e.g. ParameterNoise), when overridden.
        hook = exploration.before_compute_actions
        self._before_compute = hook if overrides(exploration, "before_compute_actions") else None
        return exploration

    def _init_action_bounds(self, space: gym.Space) -> None:
        self._low = self._high = None
        # Tuple/Dict actions travel as flat rows (see corral.utils.spaces).
        self._nested_actions = isinstance(space, (gym.spaces.Tuple, gym.spaces.Dict))
        # An integer Box's actions are its values already (a categorical per element):
        # the env gets them in the space's dtype, with no bounds to map.
        self._int_box_dtype = space.dtype if is_int_box(space) else None
        if isinstance(space, gym.spaces.Box) and self._int_box_dtype is None:
            self._low = space.low.astype(np.float32)
            self._high = space.high.astype(np.float32)

    def to_device(self, device: str | torch.device) -> None:
        """Moves every torch module of the policy (model, target networks) to `device`
        and acts there from now on: observations go to the device once per call, actions
        and fetches come back as numpy arrays, tensors the exploration creates are made
        on the device, and `set_weights` copies synced weights onto it.

        `num_gpus_per_worker` calls this in rollout workers ("cuda"; "cpu" with
        `_fake_gpus`, the same code path on the CPU).

        Raises:
            NotImplementedError: the policy acts through its own
                `compute_actions_from_obs` (SAC, DDPG, TD3), which runs on the CPU only.
        """
        # (The instance's: `__init__`'s acting functions may have chosen the hooked path.
        # An override marked `acts_on_device`, e.g. `build_policy_class`'s acting hooks,
        # moves its inputs and results itself.)
        acting = self.compute_actions_from_obs
        own = getattr(acting, "__func__", acting)
        if own is not TorchPolicy.compute_actions_from_obs and not getattr(
            own, "acts_on_device", False
        ):
            raise NotImplementedError(
                f"num_gpus_per_worker: {type(self).__name__} acts through its own "
                f"compute_actions_from_obs ({getattr(own, '__qualname__', own)}), which "
                "runs on the CPU; rollout-worker GPUs are built for policies acting through "
                "TorchPolicy's (PPO, APPO, IMPALA, PG, A2C/A3C, DQN, MARWIL/BC). Set "
                "num_gpus_per_worker=0."
            )
        self.device = torch.device(device)
        for module in vars(self).values():
            if isinstance(module, torch.nn.Module):
                module.to(self.device)
        self._device_inference = True

    def _device_scope(self) -> contextlib.AbstractContextManager[Any]:
        """Tensors made without a device (exploration noise, view columns) land on the
        policy's device while it acts there (`to_device`); a no-op otherwise."""
        return self.device if self._device_inference else contextlib.nullcontext()

    def _tensor(self, array: np.ndarray) -> torch.Tensor:
        """A numpy input as a tensor on the policy's device (no copy on the CPU)."""
        tensor = torch.from_numpy(array)
        return tensor.to(self.device, non_blocking=True) if self._device_inference else tensor

    # -- acting -------------------------------------------------------------

    def compute_actions_from_obs(
        self,
        obs: np.ndarray,
        explore: bool | None = None,
        state: list[np.ndarray] | None = None,
        prev_actions: np.ndarray | None = None,
        prev_rewards: np.ndarray | None = None,
        view_inputs: dict[str, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Actions and extra fetches for a batch of preprocessed float32 obs.

        Returns (actions, {action_logp, action_dist_inputs, vf_preds}) as
        numpy arrays; the actions are in the policy's (normalised) space.
        Recurrent policies take the batch's `state` (one array per state
        tensor, [B, ...]) and previous actions/rewards, and add
        `state_out_<i>` to the fetches. `view_inputs`: the extra view columns of
        the model's input dict (trajectory view API; feed-forward models).

        As RLlib 1.13's, each call moves `global_timestep` on by the batch's rows
        (exploration acts at the value before the call); the trainer's weight syncs
        set it to its count of sampled steps.
        """
        if explore is None:
            explore = self.config.get("explore", True)
        timestep = self.global_timestep
        self.global_timestep = timestep + len(obs)
        state_out: list[torch.Tensor] = []
        if self._before_compute is not None:
            self._before_compute(timestep=timestep, explore=explore)
        numpy_acting = self._numpy_acting
        if numpy_acting is not None and not self._device_inference:
            forward, choose = numpy_acting
            out = forward(obs)
            if out is not None:  # (None: this batch runs in torch, e.g. too many rows)
                q_values, values = out
                actions, logp = choose(q_values, timestep, explore)
                return actions, {
                    SampleBatch.ACTION_LOGP: logp,
                    SampleBatch.ACTION_DIST_INPUTS: q_values,
                    SampleBatch.VF_PREDS: values,
                }
        with torch.inference_mode(), self._device_scope():
            obs_t = self._tensor(obs)
            if state is not None and self._initial_state:
                step = self._fast_rnn_step or self._rnn_step_through_forward
                dist_inputs, values, state_out = step(
                    obs_t,
                    [self._tensor(np.asarray(s)) for s in state],
                    prev_actions,
                    prev_rewards,
                )
            else:
                dist_inputs, values = self._forward_inference(obs_t, view_inputs)
            dist = self.dist_class(dist_inputs, self.model)
            if not self._inline_sampling:
                actions, logp = self.exploration.get_exploration_action(dist, timestep, explore)
            elif explore:
                actions = dist.sample()
                logp = dist.sampled_action_logp()
            else:
                actions = dist.deterministic_sample()
                logp = torch.zeros(len(obs_t), device=obs_t.device)
            if is_nested_action(actions):
                # A distribution sampling nested actions (RLlib's form for Tuple/Dict
                # spaces): the sampler keeps them as flat rows (see corral.utils.spaces).
                actions = flatten_action_rows(self.action_space, actions)
        if self._device_inference:  # results back from the device, once each
            logp, dist_inputs, values, actions = (
                t.cpu() for t in (logp, dist_inputs, values, actions)
            )
            state_out = [s.cpu() for s in state_out]
        extra = {
            SampleBatch.ACTION_LOGP: logp.numpy(),
            SampleBatch.ACTION_DIST_INPUTS: dist_inputs.numpy(),
            SampleBatch.VF_PREDS: values.numpy(),
        }
        for i, s in enumerate(state_out):
            extra[f"state_out_{i}"] = s.numpy()
        return actions.numpy(), extra

    @default_path_hook
    def extra_action_out(
        self,
        input_dict: dict[str, Any],
        state_batches: list[torch.Tensor],
        model: TorchModelV2,
        action_dist: Any,
    ) -> dict[str, Any]:
        """RLlib 1.13's override point: the extra fetches of an acting step (each a
        sample-batch column, one row per observation), from the step's input dict (with
        its `actions`), state, model (just called on it) and action distribution (None
        under an `action_sampler_fn`). None by default (`compute_actions_from_obs` fetches
        `vf_preds` itself); a subclass overriding it acts as RLlib's `TorchPolicy` did: the
        model through its module call, and these fetches with `action_dist_inputs`,
        `action_logp` and `action_prob` (see `corral.policy.policy_template`)."""
        return {}

    def compute_log_likelihoods(
        self,
        actions: Any,
        obs_batch: Any,
        state_batches: list | None = None,
        prev_action_batch: Any = None,
        prev_reward_batch: Any = None,
        actions_normalized: bool = True,
    ) -> torch.Tensor:
        """RLlib 1.13's: log pi(actions | obs), a tensor `[B]`, under the policy's action
        distribution for a batch of (preprocessed) observations, the model run as when
        acting (a stateful one one step per row from `state_batches`, by default its
        initial state). `actions_normalized=False`: the actions are in the env's bounds
        and are normalised first where the policy acts normalised (`normalize_actions`).
        Tuple/Dict actions may come nested or as flat rows. With an
        `action_distribution_fn`, the distribution is the one it gives.

        Raises:
            ValueError: the policy acts through an `action_sampler_fn` alone, which
                gives actions but no distribution to score them under.
        """
        if self.action_sampler_fn is not None and self.action_distribution_fn is None:
            raise ValueError(
                f"{type(self).__name__}.compute_log_likelihoods: the policy samples its "
                "actions with an action_sampler_fn and has no action_distribution_fn, so "
                "there is no distribution to compute log-likelihoods under (as in RLlib 1.13)."
            )
        obs = np.asarray(obs_batch, np.float32)
        if not actions_normalized and self.config.get("normalize_actions"):
            actions = normalize_action(actions, self.action_space_struct)
        with torch.inference_mode(), self._device_scope():
            obs_t = self._tensor(obs)
            state = self._state_batches(state_batches, len(obs))
            if self.action_distribution_fn is not None:
                from corral.policy.policy_template import distribution_inputs

                dist_inputs, dist_class = distribution_inputs(
                    self, obs_t, state, prev_action_batch, prev_reward_batch
                )
                return dist_class(dist_inputs, self.model).logp(_as_tensors(actions, obs_t.device))
            if state is not None:
                step = self._fast_rnn_step or self._rnn_step_through_forward
                dist_inputs, _, _ = step(
                    obs_t,
                    [self._tensor(s) for s in state],
                    _as_array(prev_action_batch),
                    _as_array(prev_reward_batch),
                )
            else:
                dist_inputs, _ = self._forward_inference(obs_t)
            dist = self.dist_class(dist_inputs, self.model)
            return dist.logp(_as_tensors(actions, obs_t.device))

    def _rnn_step_through_forward(
        self,
        obs: torch.Tensor,
        state: list[torch.Tensor],
        prev_actions: np.ndarray | None,
        prev_rewards: np.ndarray | None,
    ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """One step of a stateful model without a matching `forward_inference_rnn` (a
        user's own recurrent model): the module call with RLlib's input dict, one-step
        sequences."""
        input_dict: dict[str, Any] = {SampleBatch.OBS: obs, "is_training": False}
        if prev_actions is not None:
            input_dict[SampleBatch.PREV_ACTIONS] = torch.as_tensor(np.asarray(prev_actions))
        if prev_rewards is not None:
            input_dict[SampleBatch.PREV_REWARDS] = torch.as_tensor(
                np.asarray(prev_rewards, np.float32)
            )
        seq_lens = torch.ones(len(obs), dtype=torch.int32)
        with self._lock:
            out, state_out = self.model(input_dict, state, seq_lens)
            return out, self.model.value_function(), list(state_out)

    def _forward_inference(
        self, obs: torch.Tensor, views: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self._fast_forward is not None:
            return self._fast_forward(obs)
        input_dict = {SampleBatch.OBS: obs}
        for k, v in (views or {}).items():
            view = torch.as_tensor(v)
            # float64 columns (a user's numpy input dict) as float32, as RLlib 1.13's
            # `convert_to_torch_tensor` gives them to models.
            input_dict[k] = view.float() if view.dtype == torch.float64 else view
        with self._lock:
            out, _ = self.model(input_dict, [], None)
            return out, self.model.value_function()

    def compute_actions(
        self,
        obs_batch: Any,
        state_batches: list | None = None,
        prev_action_batch: Any = None,
        prev_reward_batch: Any = None,
        info_batch: Any = None,
        episodes: list | None = None,
        explore: bool | None = None,
        timestep: int | None = None,
        **kwargs: Any,
    ) -> tuple[np.ndarray, list, dict]:
        obs = self.preprocessor.transform_batch(obs_batch)
        state = self._state_batches(state_batches, len(obs))
        actions, extra = self.compute_actions_from_obs(
            obs, explore, state, _as_array(prev_action_batch), _as_array(prev_reward_batch)
        )
        return self._as_rllib_actions(actions), self._pop_state_out(extra), extra

    def _as_rllib_actions(self, actions: np.ndarray) -> Any:
        """The actions of the RLlib-named batch methods (`compute_actions`,
        `compute_actions_from_input_dict`) in RLlib's form: for a Tuple/Dict action space
        nested, each leaf a batch (`nest_action_rows`; the samplers' own
        `compute_actions_from_obs` keeps flat rows)."""
        return nest_action_rows(self.action_space, actions) if self._nested_actions else actions

    def _state_batches(self, state_batches: list | None, n: int) -> list[np.ndarray] | None:
        """The given RNN states, or the initial state for every row."""
        if not self._initial_state:
            return None
        if state_batches:
            return [np.asarray(s, np.float32) for s in state_batches]
        return [np.repeat(s[None], n, axis=0) for s in self._initial_state]

    @staticmethod
    def _pop_state_out(extra: dict) -> list[np.ndarray]:
        keys = sorted((k for k in extra if k.startswith("state_out_")), key=lambda k: int(k[10:]))
        return [extra.pop(k) for k in keys]

    def compute_actions_from_input_dict(
        self,
        input_dict: dict[str, Any],
        explore: bool | None = None,
        timestep: int | None = None,
        episodes: list | None = None,
        **kwargs: Any,
    ) -> tuple[np.ndarray, list, dict]:
        obs = np.asarray(input_dict[SampleBatch.OBS], dtype=np.float32)
        states = [v for k, v in sorted(input_dict.items()) if k.startswith("state_in_")]
        views = {k: np.asarray(input_dict[k]) for k in self._act_views() if k in input_dict}
        actions, extra = self.compute_actions_from_obs(
            obs,
            explore,
            self._state_batches(states, len(obs)),
            _as_array(input_dict.get(SampleBatch.PREV_ACTIONS)),
            _as_array(input_dict.get(SampleBatch.PREV_REWARDS)),
            view_inputs=views or None,
        )
        return self._as_rllib_actions(actions), self._pop_state_out(extra), extra

    def compute_single_action(self, obs: Any = None, state: list | None = None, **kwargs: Any):
        unsquash = kwargs.pop("unsquash_action", None)
        clip = kwargs.pop("clip_action", None)
        action, state_out, extra = super().compute_single_action(obs, state, **kwargs)
        if self._nested_actions:  # (`to_env_actions` maps flat rows)
            action = flatten_actions(self.action_space, action)
        if unsquash is None:
            unsquash = self.config.get("normalize_actions", False)
        if clip is None:
            clip = self.config.get("clip_actions", False)
        return self.to_env_actions(action, unsquash, clip), state_out, extra

    def value(self, obs: np.ndarray) -> np.ndarray:
        """Value estimates for a batch of preprocessed observations."""
        with torch.inference_mode(), self._device_scope():
            if self._fast_value is not None:
                return _numpy(self._fast_value(self._tensor(obs)))
            _, values = self._forward_inference(self._tensor(obs))
        return _numpy(values)

    def bootstrap_values(self, batch: SampleBatch, rows: np.ndarray) -> np.ndarray:
        """V(new_obs) at `rows` of a sampled batch (where returns are cut).

        A recurrent policy continues from the state after that step, with
        that step's action and reward as the previous ones.
        """
        new_obs = batch[SampleBatch.NEXT_OBS][rows]
        if not self._initial_state:
            views = next_step_inputs(self.view_requirements, batch, rows)
            if not views:
                return self.value(new_obs)
            with torch.inference_mode(), self._device_scope():
                return _numpy(self._forward_inference(self._tensor(new_obs), views)[1])
        state = [batch[f"state_out_{i}"][rows] for i in range(len(self._initial_state))]
        actions = batch[SampleBatch.ACTIONS]
        if is_nested_action(actions):  # `_disable_action_flattening`: back to flat rows
            actions = flatten_action_rows(self.action_space, map_column(itemgetter(rows), actions))
        else:
            actions = actions[rows]
        with torch.inference_mode(), self._device_scope():
            step = self._fast_rnn_step or self._rnn_step_through_forward
            _, values, _ = step(
                self._tensor(new_obs),
                [self._tensor(s) for s in state],
                actions,
                batch[SampleBatch.REWARDS][rows],
            )
        return _numpy(values)

    def forward_train(self, train_batch: TensorDict) -> tuple[torch.Tensor, torch.Tensor]:
        """(dist_inputs, values) for a training minibatch (with gradients).

        Recurrent models get sequences: rows padded to `max_seq_len`, with
        `seq_lens` and each sequence's `state_in_<i>` (see `Learner`).
        """
        if not self._initial_state:
            # Through the module call (forward hooks fire), with RLlib's `is_training`.
            input_dict: dict[str, Any] = {
                SampleBatch.OBS: train_batch[SampleBatch.OBS],
                "is_training": True,
            }
            for k in declared_views(self.view_requirements):
                if k in train_batch:
                    input_dict[k] = train_batch[k]
            with self._training_lock():
                out, _ = self.model(input_dict, [], None)
                return out, self.model.value_function()
        state = [train_batch[f"state_in_{i}"] for i in range(len(self._initial_state))]
        with self._training_lock():
            out, _ = self.model(train_batch, state, train_batch[SampleBatch.SEQ_LENS])
            return out, self.model.value_function()

    def _training_lock(self) -> contextlib.AbstractContextManager:
        """The lock, except inside a `torch_compile_learner` trace (a lock would break the
        graph; the compiled update then does not wait for an acting thread)."""
        if torch.compiler.is_compiling():
            return contextlib.nullcontext()
        return self._lock

    def _act_views(self) -> list[str]:
        """The extra view columns the model reads when acting."""
        reqs = declared_views(self.view_requirements)
        return [k for k, vr in reqs.items() if vr.used_for_compute_actions]

    def is_recurrent(self) -> bool:
        return bool(self._initial_state)

    def get_initial_state(self) -> list[np.ndarray]:
        return [s.copy() for s in self._initial_state]

    def to_env_actions(self, actions: np.ndarray, unsquash: bool, clip: bool) -> np.ndarray:
        """Maps policy-space actions to the env's Box bounds.

        With `normalize_actions`, the policy acts in [-1, 1] and the action is
        stretched onto [low, high] (then clipped); with `clip_actions` it is
        only clipped. Tuple/Dict actions are rebuilt from their flat rows (a
        list of nested actions, Box leaves treated as above); other spaces pass
        through, but an integer Box's in the space's dtype.
        """
        if self._nested_actions:
            return unflatten_actions(self.action_space, actions, unsquash, clip)
        if self._low is None or self._high is None or not (unsquash or clip):
            if self._int_box_dtype is not None:
                return np.asarray(actions).astype(self._int_box_dtype, copy=False)
            return actions
        if unsquash:
            actions = self._low + (actions + 1.0) * 0.5 * (self._high - self._low)
        return np.clip(actions, self._low, self._high)

    # -- learning -----------------------------------------------------------

    def loss(
        self, model: torch.nn.Module, dist_class: type, train_batch: TensorDict
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Returns (total loss, stats) for one minibatch; algorithms implement this."""
        raise NotImplementedError(f"{type(self).__name__} does not define a loss.")

    def extra_grad_info(self, train_batch: TensorDict) -> dict[str, Any]:
        """Learner stats of a loss that returned a bare tensor (RLlib's `stats_fn`):
        the mean of each `model.tower_stats` entry."""
        stats: dict[str, Any] = {}
        for name, value in getattr(self.model, "tower_stats", {}).items():
            if torch.is_tensor(value) and value.numel() > 0:
                stats[name] = value.detach().float().mean()
            elif isinstance(value, (int, float)):
                stats[name] = float(value)
        return stats

    @default_path_hook
    def extra_grad_process(self, optimizer: torch.optim.Optimizer, loss: torch.Tensor) -> dict:
        """RLlib 1.13's override point, called after `loss.backward()` and before the
        optimiser step of each minibatch (e.g. to clip the gradients on `optimizer`'s
        parameters); its dict joins the learner stats. A subclass overriding it processes
        the gradients instead of the learner's `grad_clip` clipping (RLlib's policies
        clipped here, with `apply_grad_clipping`). By default: nothing (the learner clips)."""
        return {}

    @default_path_hook
    def extra_compute_grad_fetches(self) -> dict[str, Any]:
        """RLlib 1.13's override point: extra values (e.g. TD errors) that a subclass adds
        to what `learn_on_batch` and `compute_gradients` return and to a trainer's learner
        info of the policy (beside `learner_stats`)."""
        from corral.utils.metrics.learner_info import LEARNER_STATS_KEY

        return {LEARNER_STATS_KEY: {}}

    def get_tower_stats(self, stats_name: str) -> list[Any]:
        """`model.tower_stats[stats_name]` of each tower (corral trains on one)."""
        stats = getattr(self.model, "tower_stats", {})
        return [stats[stats_name]] if stats_name in stats else []

    @classmethod
    def with_updates(cls, **overrides: Any) -> type:
        """A subclass with some functions replaced, as RLlib 1.x's
        `PolicyClass.with_updates(loss_fn=..., postprocess_fn=..., name=...)`; see
        `corral.policy.policy_template.build_policy_class` for the functions."""
        from corral.policy.policy_template import with_updates_of

        return with_updates_of(cls, **overrides)

    @keyword_aliases(samples="postprocessed_batch")  # (the name of `Policy`'s and QMix's)
    def learn_on_batch(self, postprocessed_batch: SampleBatch) -> dict:
        """One update on `postprocessed_batch` (all rows, one minibatch) by this policy's
        own learner.

        Returns:
            RLlib 1.13's info: `{"learner_stats": {...}, "num_agent_steps_trained": n,
            "custom_metrics": {...}}` (what `on_learn_on_batch` put in its result).
        """
        from corral.utils.metrics.learner_info import learner_info_from

        results = self._own_learner().update(batch=postprocessed_batch)
        return learner_info_from(results)[_OWN_ID]

    # -- RLlib 1.13's multi-device API: load a batch once, learn on slices of it --

    def load_batch_into_buffer(self, batch: SampleBatch, buffer_index: int = 0) -> int:
        """Keeps `batch` in buffer `buffer_index` for `learn_on_loaded_batch` (corral
        trains on one device: the buffer holds the batch as it is); returns its rows."""
        loaded = self.__dict__.setdefault("_loaded_batches", {})
        loaded[buffer_index] = batch
        return int(batch.count)

    def get_num_samples_loaded_into_buffer(self, buffer_index: int = 0) -> int:
        """The rows loaded into buffer `buffer_index` (0 when none)."""
        batch = self.__dict__.get("_loaded_batches", {}).get(buffer_index)
        return 0 if batch is None else int(batch.count)

    def learn_on_loaded_batch(self, offset: int = 0, buffer_index: int = 0) -> dict:
        """One update on the loaded rows `[offset, offset + sgd_minibatch_size)` (all of
        them when the minibatch size is unset or not smaller); `learn_on_batch`'s info.

        Raises:
            ValueError: nothing was loaded into that buffer.
        """
        batch = self.__dict__.get("_loaded_batches", {}).get(buffer_index)
        if batch is None:
            raise ValueError(
                "Must call Policy.load_batch_into_buffer() before Policy.learn_on_loaded_batch()!"
            )
        size = int(self.config.get("sgd_minibatch_size") or self.config["train_batch_size"])
        if size >= batch.count:
            return self.learn_on_batch(batch)
        return self.learn_on_batch(batch.slice(offset, offset + size))

    def compute_gradients(
        self, postprocessed_batch: SampleBatch
    ) -> tuple[list[np.ndarray | None], dict[str, Any]]:
        """RLlib 1.13's gradients of the loss on a batch, without an optimiser step.

        Args:
            postprocessed_batch: a train batch of this policy (e.g. with advantages).

        Returns:
            (gradients, info): one numpy array per model parameter (in the
            optimiser's order, which is `model.parameters()`'s for the default
            `make_optimizer`; None where the loss has no gradient), already clipped
            to `grad_clip`; info is `{"learner_stats": {...}}`.

        Raises:
            NotImplementedError: the policy updates itself in `learn_step`.
            NonFiniteUpdateError: the loss or a gradient is NaN/inf.
        """
        return self._own_learner().compute_gradients(_OWN_ID, postprocessed_batch)

    def apply_gradients(self, gradients: Sequence[np.ndarray | torch.Tensor | None]) -> None:
        """One step of this policy's optimiser with `gradients` (as `compute_gradients`
        returns them, e.g. from a remote worker); bumps `weights_seq`.

        The optimiser is the one `learn_on_batch` steps (its moments are shared), so
        `apply_gradients(compute_gradients(b)[0])` leaves the same weights as
        `learn_on_batch(b)` (which also runs `after_update` and the callbacks).
        """
        self._own_learner().apply_gradients(_OWN_ID, gradients)

    def _own_learner(self) -> Learner:
        """The `Learner` of this policy's own updates (`learn_on_batch`, gradients),
        built on first use. (A trainer trains its policies through its `LearnerGroup`.)"""
        if getattr(self, "_learner", None) is None:
            from corral.core.learner import Learner

            self._learner = Learner({_OWN_ID: self}, self.config, device=self.device)
        return self._learner

    # -- state --------------------------------------------------------------

    def get_weights(self) -> dict[str, np.ndarray]:
        return {k: v.detach().cpu().numpy().copy() for k, v in self.model.state_dict().items()}

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads numpy weights into the model, on its device (`to_device`).

        Under the policy's lock, as the model calls that go through the module: a
        sampling thread (`sample_async`) acting through it never sees half a load.
        """
        state = {
            k: torch.as_tensor(_writable(np.asarray(v)), device=self.device)
            for k, v in weights.items()
        }
        with self._lock:
            self.model.load_state_dict(state)

    def extra_state(self) -> dict[str, Any]:
        """JSON-able algorithm state beyond the weights (e.g. PPO's KL coefficient)."""
        return {}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        pass

    def get_state(self) -> dict[str, Any]:
        state = super().get_state()
        state["extra"] = self.extra_state()
        state["exploration"] = self.exploration.get_state()
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        self.set_extra_state(state.get("extra", {}))
        if "exploration" in state:
            self.exploration.set_state(state["exploration"])

    # -- export and import --------------------------------------------------

    def export_model(self, export_dir: str, onnx: int | None = None) -> None:
        """Writes the model for serving without corral.

        Without `onnx`: `model.pt` (TorchScript) and `model_state_dict.pt`.
        With `onnx=<opset>`: `model.onnx`. Both map a batch of preprocessed
        observations to action-distribution inputs and value estimates.
        """
        from corral.policy import model_io

        shape = tuple(self.preprocessor.shape)
        if onnx is None:
            model_io.export_torchscript(self.model, shape, export_dir)
        else:
            model_io.export_onnx(self.model, shape, export_dir, onnx)

    def export_checkpoint(self, export_dir: str, filename_prefix: str = "model") -> None:
        """Writes `<prefix>.safetensors` (weights) and `<prefix>_state.json` (the rest).

        Plain data only, so loading it can never run code.
        """
        from corral.utils.checkpoints import write_weights_and_state

        write_weights_and_state(
            export_dir,
            self.get_state(),
            weights_file=f"{filename_prefix}.safetensors",
            state_file=f"{filename_prefix}_state.json",
        )

    def import_model_from_h5(self, import_file: str) -> None:
        """Loads weights from an HDF5 file whose groups are named like the model's layers."""
        from corral.policy import model_io

        layers = model_io.read_h5_layers(import_file)
        self.set_weights(model_io.h5_layers_to_state(layers, self.get_weights(), import_file))
        self.bump_weights_seq()


def _fast_forward_of(
    model: torch.nn.Module,
    attr: str = "forward_inference",
    same: tuple[str, ...] = ("forward", "value_function"),
) -> Callable[..., Any] | None:
    """`model.<attr>` (a fast path) when the class defining it also defines the `forward`
    and `value_function` (and the other methods in `same`) the model runs, so both give
    the same results; else None."""
    fast = getattr(model, attr, None)
    if fast is None:
        return None
    cls = type(model)
    owner = next((c for c in cls.__mro__ if attr in c.__dict__), None)
    if owner is None:  # set on the instance: the user's own choice
        return fast
    for name in (*same, "__call__"):
        if getattr(cls, name, None) is not getattr(owner, name, None):
            return None
    return fast


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    """A result tensor as numpy (copied to the CPU first when it is on a device)."""
    return tensor.numpy() if tensor.device.type == "cpu" else tensor.cpu().numpy()


def _as_tensors(actions: Any, device: torch.device) -> Any:
    """Actions (an array, or a nest of arrays for Tuple/Dict spaces) as tensors on
    `device`."""
    if isinstance(actions, dict):
        return {k: _as_tensors(v, device) for k, v in actions.items()}
    if isinstance(actions, (tuple, list)) and actions and not np.isscalar(actions[0]):
        return type(actions)(_as_tensors(v, device) for v in actions)
    return torch.as_tensor(np.asarray(actions), device=device)


def _as_array(value: object) -> np.ndarray | None:
    return None if value is None else np.asarray(value)


def _writable(array: np.ndarray) -> np.ndarray:
    """`array`, copied if read-only (e.g. zero-copy from Ray's object store): torch
    cannot wrap a read-only buffer without a warning."""
    return array if array.flags.writeable else array.copy()


class LearningRateSchedule:
    """Policy mixin: `cur_lr` follows `lr_schedule` over the global timestep.

    `lr_schedule` is RLlib's [[timestep, lr], ...] (piecewise linear, then
    constant); None keeps `lr`. The learner sets its optimiser's rate to
    `cur_lr` before each update. List it before `TorchPolicy` in the bases
    and call `LearningRateSchedule.__init__` after `TorchPolicy.__init__`.
    """

    def __init__(self, lr: float, lr_schedule: list | None) -> None:
        self._lr_schedule = make_schedule(lr_schedule, lr)
        self.cur_lr = self._lr_schedule(0)

    def on_global_var_update(self, global_vars: dict) -> None:
        super().on_global_var_update(global_vars)  # type: ignore[misc]
        self.cur_lr = self._lr_schedule(self.global_timestep)  # type: ignore[attr-defined]


class EntropyCoeffSchedule:
    """Policy mixin: `entropy_coeff` follows `entropy_coeff_schedule` over the global
    timestep (None keeps `entropy_coeff`); used like `LearningRateSchedule`."""

    def __init__(self, entropy_coeff: float, entropy_coeff_schedule: list | None) -> None:
        self._entropy_schedule = make_schedule(entropy_coeff_schedule, entropy_coeff)
        self.entropy_coeff = self._entropy_schedule(0)

    def on_global_var_update(self, global_vars: dict) -> None:
        super().on_global_var_update(global_vars)  # type: ignore[misc]
        self.entropy_coeff = self._entropy_schedule(self.global_timestep)  # type: ignore[attr-defined]
