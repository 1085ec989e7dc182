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
  `make_model_and_action_dist(...)` -> `(model, dist_class)`, both the policy's;
- `get_default_config()` -> defaults under the config the policy gets;
- `validate_spaces`, `before_init`, `before_loss_init`, `after_init`, `_after_loss_init`
  run at those points of `__init__` (each as `fn(policy, obs_space, action_space,
  config)`);
- `mixins` are put before the base class (their `__init__` is not called; do it in
  `before_loss_init`, as RLlib 1.13's own policies did).

Acting (any of these gives the class RLlib 1.13's `_compute_action_helper` in
`compute_actions_from_obs`: the model called through its module call, under `no_grad`):

- `action_sampler_fn(policy, model, input_dict, state_batches, explore, timestep) ->
  (actions, logp[, dist_inputs, state_out])` replaces the model, the distribution and the
  exploration;
- `action_distribution_fn(policy, model, input_dict=, state_batches=, seq_lens=,
  explore=, timestep=, is_training=) -> (dist_inputs, dist_class, state_out)` (or RLlib's
  older form `fn(policy, model, obs_batch, explore=, timestep=, is_training=)`) replaces
  the model call; the exploration then picks the actions from `dist_class(dist_inputs)`;
- `extra_action_out_fn(policy, input_dict, state_batches, model, action_dist) -> dict` ->
  `extra_action_out()`: the extra fetches of each step (sample-batch columns).

  The fetches of this path are RLlib 1.13's: `extra_action_out()`'s (none by default)
  and `action_dist_inputs`, `action_logp`, `action_prob` where they exist; value
  predictions come from an `extra_action_out_fn` such as `vf_preds_fetches`.

Learning:

- `extra_grad_process_fn(policy, optimizer, loss) -> dict` runs after `backward()`,
  instead of corral's `grad_clip` clipping (RLlib 1.13's policies clipped there, with
  `apply_grad_clipping`); its dict joins the learner stats;
- `compute_gradients_fn(policy, batch) -> (gradients, info)` and
  `apply_gradients_fn(policy, gradients)` replace `compute_gradients` and
  `apply_gradients`; in each update the learner computes the gradients, then calls
  `apply_gradients_fn(policy, _directStepOptimizerSingleton)` to step the optimisers
  (`policy._optimizers`, RLlib's list) with the gradients on the parameters;
- `extra_learn_fetches_fn(policy) -> dict` -> `extra_compute_grad_fetches()`: added to
  what `learn_on_batch` and `compute_gradients` return and to a trainer's learner info of
  the policy (beside `learner_stats`);
- `get_batch_divisibility_req(policy) -> int` -> `batch_divisibility_req`: the batches a
  learner trains the policy on (a trainer's, `learn_on_batch`'s, `compute_gradients`') are
  padded to whole chunks of that many rows per trajectory unless their row count divides
  (RLlib 1.13's `pad_batch_to_sequences_of_same_size`).

The three gradient hooks give the class its own `learn_step` (a `Learner` then calls it per
minibatch); they are refused on a base class that has one already (SAC, DDPG, SlateQ, ...),
whose `learn_step` orders its own updates.

A hand-written `TorchPolicy` subclass may give its `__init__`'s call of
`TorchPolicy.__init__` RLlib 1.13's keywords instead: `loss=` (a `loss_fn`),
`action_sampler_fn=` / `action_distribution_fn=`, `model=` with `action_distribution_class=`,
`max_seq_len=`, `get_batch_divisibility_req=`. The functions are then the instance's
(`bind_policy_functions`): an instance given an acting function acts through the hooked
`compute_actions_from_obs` above, the others (and other classes) keep the fast path. A
`with_updates` of such a class gives its own functions precedence over them.

A hand-written `TorchPolicy` subclass overriding RLlib 1.13's methods `extra_action_out`,
`extra_grad_process` or `extra_compute_grad_fetches` gets the same paths as the hooks
above (`wire_override_points`, run at class creation by `TorchPolicy.__init_subclass__`):
the hook functions above are those methods of the built class.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from types import MethodType
from typing import Any

import numpy as np
import torch

from corral.core.learner.learner import load_gradients, params_of
from corral.policy.rnn_sequencing import divisible_train_batch
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_policy import (
    _OWN_ID,
    TorchPolicy,
    _directStepOptimizerSingleton,
    batch_divisibility_req_of,
    overrides_hook,
    with_learn_fetches,
)
from corral.utils.numpy import convert_to_numpy
from corral.utils.spaces import flatten_action_rows, is_nested_action

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
    "_after_loss_init",
    "make_model",
    "make_model_and_action_dist",
    "mixins",
    "extra_action_out_fn",
    "action_sampler_fn",
    "action_distribution_fn",
    "extra_grad_process_fn",
    "extra_learn_fetches_fn",
    "compute_gradients_fn",
    "apply_gradients_fn",
    "get_batch_divisibility_req",
)
# The hooks that give the class its own `learn_step`.
_GRADIENT_HOOKS = ("extra_grad_process_fn", "compute_gradients_fn", "apply_gradients_fn")


def build_policy_class(
    name: str,
    framework: str,
    *,
    loss_fn: Callable | None = None,
    get_default_config: Callable[[], dict] | None = None,
    stats_fn: Callable | None = None,
    postprocess_fn: Callable | None = None,
    extra_action_out_fn: Callable | None = None,
    extra_grad_process_fn: Callable | None = None,
    extra_learn_fetches_fn: Callable | None = None,
    optimizer_fn: Callable | None = None,
    validate_spaces: Callable | None = None,
    before_init: Callable | None = None,
    before_loss_init: Callable | None = None,
    after_init: Callable | None = None,
    _after_loss_init: Callable | None = None,
    action_sampler_fn: Callable | None = None,
    action_distribution_fn: Callable | None = None,
    make_model: Callable | None = None,
    make_model_and_action_dist: Callable | None = None,
    compute_gradients_fn: Callable | None = None,
    apply_gradients_fn: Callable | None = None,
    mixins: list[type] | None = None,
    get_batch_divisibility_req: Callable | None = None,
    _base: type[TorchPolicy] | None = None,
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
        extra_action_out_fn: `fn(policy, input_dict, state_batches, model,
            action_dist) -> dict` of extra fetches of each acting step (tensors or
            arrays, one row per observation); `action_dist` is None under an
            `action_sampler_fn`.
        extra_grad_process_fn: `fn(policy, optimizer, loss) -> dict` of stats, called
            after `loss.backward()` and before the optimiser step (e.g. to clip the
            gradients); replaces the `grad_clip` clipping.
        extra_learn_fetches_fn: `fn(policy) -> dict` added to the results of
            `learn_on_batch` and `compute_gradients` (beside `learner_stats`).
        optimizer_fn: `fn(policy, config) -> torch optimizer`.
        validate_spaces: `fn(policy, obs_space, action_space, config)`, run first,
            before the base class's `__init__`.
        before_init: the same signature, run next, before the base's `__init__`.
        before_loss_init: the same signature, run after the base's `__init__`.
        after_init: the same signature, run after `before_loss_init`.
        _after_loss_init: the same signature, run last.
        action_sampler_fn: `fn(policy, model, input_dict, state_batches, explore=,
            timestep=) -> (actions, logp)` or `(actions, logp, dist_inputs, state_out)`
            (logp and dist_inputs may be None).
        action_distribution_fn: `fn(policy, model, input_dict=, state_batches=,
            seq_lens=, explore=, timestep=, is_training=) -> (dist_inputs, dist_class,
            state_out)`, or `fn(policy, model, obs_batch, explore=, timestep=,
            is_training=)`.
        make_model: `fn(policy, obs_space, action_space, config) -> model`.
        make_model_and_action_dist: `fn(policy, obs_space, action_space, config) ->
            (model, dist_class)` (not with `make_model`).
        compute_gradients_fn: `fn(policy, batch) -> (gradients, info)`; the gradients
            it leaves on the parameters (or returns, one per optimised parameter) are
            the ones stepped.
        apply_gradients_fn: `fn(policy, gradients)`: steps `policy._optimizers`
            with `gradients` (or, given `_directStepOptimizerSingleton`, with those on the
            parameters).
        mixins: classes put before the base in the new class's bases.
        get_batch_divisibility_req: `fn(policy) -> int` (see the module).
        _base: the class to extend (`TorchPolicy`; `with_updates` passes its own).

    Returns:
        The new policy class; its `with_updates(**overrides)` builds a variant.

    Raises:
        ValueError: another framework, no loss, or both `make_model` and
            `make_model_and_action_dist`.
        NotImplementedError: a gradient hook on a base class with its own `learn_step`.
    """
    if framework != "torch":
        raise ValueError(
            f"build_policy_class(name={name!r}, framework={framework!r}): corral builds "
            "torch policies only (framework='torch')."
        )
    base: type[TorchPolicy] = _base or TorchPolicy
    own_step = _own_learn_step(base)
    # (A base with an `__init__` of its own may give its instances their loss, RLlib
    # 1.13's `TorchPolicy.__init__(..., loss=)`.)
    if (
        loss_fn is None
        and base.loss is TorchPolicy.loss
        and base.__init__ is TorchPolicy.__init__
        and not own_step
    ):
        raise ValueError(f"build_policy_class(name={name!r}) needs a `loss_fn`.")
    if make_model is not None and make_model_and_action_dist is not None:
        raise ValueError(
            f"build_policy_class(name={name!r}): give `make_model` or "
            "`make_model_and_action_dist`, not both."
        )
    original_kwargs = {k: v for k, v in locals().items() if k in _BUILT_HOOKS or k == "_base"}
    original_kwargs.update(name=name, framework=framework)
    gradient_hooks = [k for k in _GRADIENT_HOOKS if original_kwargs[k] is not None]
    if gradient_hooks and own_step:
        raise NotImplementedError(
            f"build_policy_class(name={name!r}): {base.__name__} orders its own updates in "
            f"`learn_step`, so the hooks {gradient_hooks} have no gradient step to go into; "
            "they are built for policies the learner steps from their loss (TorchPolicy, "
            "PG, PPO, A2C, IMPALA, APPO, ...)."
        )

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
        # This class's functions win over those the base's `__init__` bound to the
        # instance (RLlib 1.13's `TorchPolicy.__init__(..., loss=, action_sampler_fn=)`).
        unbind_policy_functions(
            self,
            loss=loss_fn is not None,
            acting=bool(action_sampler_fn or action_distribution_fn),
        )
        if action_sampler_fn or action_distribution_fn:  # (RLlib 1.13's attributes)
            self.action_sampler_fn = action_sampler_fn
            self.action_distribution_fn = action_distribution_fn
        if get_batch_divisibility_req is not None:
            self.batch_divisibility_req = batch_divisibility_req_of(
                self, get_batch_divisibility_req
            )
        if before_loss_init is not None:
            before_loss_init(self, observation_space, action_space, config)
        if after_init is not None:
            after_init(self, observation_space, action_space, config)
        if _after_loss_init is not None:
            _after_loss_init(self, observation_space, action_space, config)

    namespace: dict[str, Any] = {"__init__": __init__, "_template_kwargs": original_kwargs}
    if loss_fn is not None:
        namespace["loss"] = loss_method(loss_fn)
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
    if make_model_and_action_dist is not None:

        def make_model_and_dist(self: TorchPolicy, num_outputs: int) -> Any:
            model, dist_class = make_model_and_action_dist(
                self, self.observation_space, self.action_space, self.config
            )
            # (`TorchPolicy.__init__` set the catalog's class just before.)
            self.dist_class = dist_class
            return model

        namespace["make_model"] = make_model_and_dist
    if get_default_config is not None:
        namespace["get_default_config"] = staticmethod(get_default_config)
    # (The methods RLlib 1.13's hooks stand for; `TorchPolicy.__init_subclass__` wires
    # those the class has into its acting and learning, `wire_override_points`.)
    if action_sampler_fn or action_distribution_fn or extra_action_out_fn:
        namespace.update(_acting_methods(action_sampler_fn, action_distribution_fn))
    if extra_action_out_fn is not None:

        def extra_action_out(self, input_dict, state_batches, model, action_dist):
            return extra_action_out_fn(self, input_dict, state_batches, model, action_dist)

        namespace["extra_action_out"] = extra_action_out
    if extra_grad_process_fn is not None:

        def extra_grad_process(self, optimizer, loss):
            return extra_grad_process_fn(self, optimizer, loss)

        namespace["extra_grad_process"] = extra_grad_process
    if compute_gradients_fn or apply_gradients_fn:
        namespace.update(_gradient_methods(compute_gradients_fn, apply_gradients_fn))
    if extra_learn_fetches_fn is not None:
        namespace["extra_compute_grad_fetches"] = lambda self: {
            "learner_stats": {},
            **convert_to_numpy(extra_learn_fetches_fn(self)),
        }

    def with_updates(**overrides: Any) -> type:
        """A variant of this class with some of its functions replaced."""
        return build_policy_class(**{**original_kwargs, **overrides})

    namespace["with_updates"] = staticmethod(with_updates)
    bases = (*(mixins or []), base)
    cls = type(name, bases, namespace)
    cls.__qualname__ = name
    return cls


def loss_method(loss_fn: Callable[..., Any]) -> Callable[..., Any]:
    """RLlib 1.13's loss function `loss_fn(policy, model, dist_class, train_batch)` as the
    policy's `loss(model, dist_class, train_batch)` method (a bare tensor, a list of them
    or `(loss, stats)`; see `corral.core.learner.learner.loss_and_stats`)."""

    def loss(self, model, dist_class, train_batch):
        return loss_fn(self, model, dist_class, train_batch)

    return loss


def bind_policy_functions(
    policy: TorchPolicy,
    loss_fn: Callable | None,
    action_sampler_fn: Callable | None,
    action_distribution_fn: Callable | None,
) -> None:
    """Gives one policy (not its class) RLlib 1.13's functions of
    `TorchPolicy.__init__(..., loss=, action_sampler_fn=, action_distribution_fn=)`, as
    `build_policy_class` gives them to a class: `loss_fn` as its `loss` (reading any
    column: `train_columns` None), the acting functions through `_acting_methods`'
    `compute_actions_from_obs`. Policies built without them keep their class's methods
    (the fast acting path)."""
    attrs = vars(policy)
    if loss_fn is not None:
        attrs["loss"] = MethodType(loss_method(loss_fn), policy)
        attrs["train_columns"] = None
    if action_sampler_fn is not None or action_distribution_fn is not None:
        acting = _acting_methods(action_sampler_fn, action_distribution_fn)
        attrs["compute_actions_from_obs"] = MethodType(acting["compute_actions_from_obs"], policy)


def unbind_policy_functions(policy: TorchPolicy, *, loss: bool, acting: bool) -> None:
    """Drops the functions `bind_policy_functions` gave `policy` (the loss, the acting
    path), so that its class's methods are called again."""
    attrs = vars(policy)
    if loss and "loss" in attrs:
        del attrs["loss"]
        attrs.pop("train_columns", None)
    if acting:
        attrs.pop("compute_actions_from_obs", None)


# -- acting ---------------------------------------------------------------------------------


def _binds(fn: Callable, *args: Any, **kwargs: Any) -> bool:
    """Whether `fn` takes these arguments (True where its signature cannot be read)."""
    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        return False
    except ValueError:
        return True
    return True


def _sampler_caller(fn: Callable) -> Callable[..., Any]:
    """`fn(policy, model, input_dict, state_batches, explore, timestep)` in the form
    `fn` takes: RLlib 1.13's, or the older one with the observations (a third parameter
    named `obs_batch`) and without `state_batches`."""
    params = list(inspect.signature(fn).parameters)
    by_obs = len(params) > 2 and params[2] == "obs_batch"
    with_states = _binds(fn, 0, 1, 2, 3, explore=True, timestep=0)

    def call(policy, model, input_dict, state_batches, explore, timestep):
        third = input_dict[SampleBatch.OBS] if by_obs else input_dict
        if with_states:
            return fn(policy, model, third, state_batches, explore=explore, timestep=timestep)
        return fn(policy, model, third, explore=explore, timestep=timestep)

    return call


def _distribution_caller(fn: Callable) -> Callable[..., Any]:
    """`fn(policy, model, input_dict, state_batches, seq_lens, explore, timestep)` (with
    `is_training=False`) in the form `fn` takes: RLlib 1.13's keyword form, or its older
    `fn(policy, model, obs_batch, explore=, timestep=, is_training=)` (1.13 fell back to
    it on a TypeError; the signature says it here)."""
    keywords = ("input_dict", "state_batches", "seq_lens", "explore", "timestep", "is_training")
    new_form = _binds(fn, 0, 1, **dict.fromkeys(keywords))

    def call(policy, model, input_dict, state_batches, seq_lens, explore, timestep):
        if new_form:
            return fn(
                policy,
                model,
                input_dict=input_dict,
                state_batches=state_batches,
                seq_lens=seq_lens,
                explore=explore,
                timestep=timestep,
                is_training=False,
            )
        return fn(
            policy,
            model,
            input_dict[SampleBatch.OBS],
            explore=explore,
            timestep=timestep,
            is_training=False,
        )

    return call


def distribution_inputs(
    policy: Any,
    obs: torch.Tensor,
    state: list[np.ndarray] | None,
    prev_actions: Any = None,
    prev_rewards: Any = None,
) -> tuple[Any, type]:
    """`(dist_inputs, dist_class)` of a batch of observations through the policy's
    `action_distribution_fn` (explore off), as RLlib 1.13's `compute_log_likelihoods`
    asked it; `state`: the RNN states, one row per observation."""
    input_dict: dict[str, Any] = {SampleBatch.OBS: obs, "is_training": False}
    if prev_actions is not None:
        input_dict[SampleBatch.PREV_ACTIONS] = policy._tensor(np.asarray(prev_actions))
    if prev_rewards is not None:
        input_dict[SampleBatch.PREV_REWARDS] = policy._tensor(np.asarray(prev_rewards))
    states = [policy._tensor(np.asarray(s)) for s in state or []]
    seq_lens = torch.ones(len(obs), dtype=torch.int32, device=obs.device) if states else None
    call = _distribution_caller(policy.action_distribution_fn)
    dist_inputs, dist_class, _ = call(
        policy, policy.model, input_dict, states, seq_lens, False, policy.global_timestep
    )
    return dist_inputs, dist_class


def _acting_methods(
    action_sampler_fn: Callable | None, action_distribution_fn: Callable | None
) -> dict[str, Any]:
    """`compute_actions_from_obs` as RLlib 1.13's `_compute_action_helper` (through the
    given hooks and the class's `extra_action_out`), for the class's namespace."""
    sample = None if action_sampler_fn is None else _sampler_caller(action_sampler_fn)
    distribution = (
        None if action_distribution_fn is None else _distribution_caller(action_distribution_fn)
    )

    def compute_actions_from_obs(
        self,
        obs: np.ndarray,
        explore: bool | None = None,
        state: list[np.ndarray] | None = None,
        prev_actions: np.ndarray | None = None,
        prev_rewards: np.ndarray | None = None,
        view_inputs: dict[str, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Actions and extra fetches of a batch of observations through the acting
        hooks (see `corral.policy.policy_template`); the rest as `TorchPolicy`'s."""
        if explore is None:
            explore = self.config.get("explore", True)
        timestep = self.global_timestep
        self.global_timestep = timestep + len(obs)  # (as `TorchPolicy`'s)
        with torch.no_grad(), self._device_scope():
            input_dict: dict[str, Any] = {
                SampleBatch.OBS: self._tensor(np.asarray(obs)),
                "is_training": False,
            }
            if prev_actions is not None:
                input_dict[SampleBatch.PREV_ACTIONS] = self._tensor(np.asarray(prev_actions))
            if prev_rewards is not None:
                input_dict[SampleBatch.PREV_REWARDS] = self._tensor(
                    np.asarray(prev_rewards, np.float32)
                )
            for k, v in (view_inputs or {}).items():
                input_dict[k] = self._tensor(np.asarray(v))
            state_batches = [self._tensor(np.asarray(s)) for s in state or []]
            seq_lens = (
                torch.ones(len(obs), dtype=torch.int32, device=self.device)
                if state_batches
                else None
            )
            dist_inputs = None
            if sample is not None:
                out = sample(self, self.model, input_dict, state_batches, explore, timestep)
                if len(out) == 4:
                    actions, logp, dist_inputs, state_out = out
                elif len(out) == 3:  # (RLlib 1.x's older form)
                    actions, logp, state_out = out
                else:
                    (actions, logp), state_out = out, []
                input_dict[SampleBatch.ACTIONS] = actions
                extra = self.extra_action_out(input_dict, state_batches, self.model, None)
            else:
                if self._before_compute is not None:
                    self._before_compute(timestep=timestep, explore=explore)
                with self._lock:
                    if distribution is not None:
                        dist_inputs, dist_class, state_out = distribution(
                            self, self.model, input_dict, state_batches, seq_lens, explore, timestep
                        )
                    else:
                        dist_class = self.dist_class
                        dist_inputs, state_out = self.model(input_dict, state_batches, seq_lens)
                    action_dist = dist_class(dist_inputs, self.model)
                    actions, logp = self.exploration.get_exploration_action(
                        action_distribution=action_dist, timestep=timestep, explore=explore
                    )
                    input_dict[SampleBatch.ACTIONS] = actions
                    # (Under the lock: it may read what the model call cached, e.g. values.)
                    extra = self.extra_action_out(
                        input_dict, state_batches, self.model, action_dist
                    )
            if is_nested_action(actions):  # flat rows for the sampler (corral.utils.spaces)
                actions = flatten_action_rows(self.action_space, actions)
            fetches = dict(convert_to_numpy(dict(extra or {})))
            if dist_inputs is not None:
                fetches[SampleBatch.ACTION_DIST_INPUTS] = convert_to_numpy(dist_inputs)
            if logp is not None:
                logp = convert_to_numpy(logp)
                fetches[SampleBatch.ACTION_PROB] = np.exp(logp)
                fetches[SampleBatch.ACTION_LOGP] = logp
            for i, s in enumerate(state_out or []):
                fetches[f"state_out_{i}"] = convert_to_numpy(s)
            if torch.is_tensor(actions):
                actions = actions.cpu().numpy()
        return np.asarray(actions), fetches

    # It moves its inputs to the policy's device and its results back (`to_device`).
    compute_actions_from_obs.acts_on_device = True  # type: ignore[attr-defined]
    compute_actions_from_obs.calls_extra_action_out = True  # type: ignore[attr-defined]
    # Whether it acts through the user's functions rather than the model call (the model
    # may then have no `forward` of RLlib's contract: `TorchPolicy` checks none).
    compute_actions_from_obs.acting_hooks = (  # type: ignore[attr-defined]
        sample is not None or distribution is not None
    )
    return {"compute_actions_from_obs": compute_actions_from_obs}


# -- learning -------------------------------------------------------------------------------


def current_optimizers(policy: TorchPolicy) -> list[torch.optim.Optimizer]:
    """RLlib 1.13's `policy._optimizers`: the optimisers of the update under way (set by a
    `build_policy_class` policy's `learn_step` and `apply_gradients`), else those of the
    policy's own updates (`learn_on_batch`, `apply_gradients`)."""
    from corral.core.learner.finite import optimizers_of

    current = getattr(policy, "_optimizers", None)
    if current is not None:
        return list(current)
    return optimizers_of(policy._own_learner().optimizers[_OWN_ID])


def step_with_gradients(
    policy: TorchPolicy,
    optimizers: Sequence[torch.optim.Optimizer],
    gradients: Any,
    skip: Sequence[torch.Tensor] = (),
) -> None:
    """One step of `optimizers` with `gradients` (one per parameter, in their order, as
    `compute_gradients` returns them; `_directStepOptimizerSingleton`: the gradients on
    the parameters), at the policy's `cur_lr` (`LearningRateSchedule`), after the finite
    check; the parameters `skip` are left out of this step. The gradients are cleared
    after it.

    Raises:
        ValueError: `gradients` has another length, or an entry another shape, than the
            parameters.
        NonFiniteUpdateError: a gradient is NaN/inf (nothing is stepped).
    """
    from corral.core.learner.finite import check_finite_update
    from corral.utils.torch_utils import clear_grads, step_optimizer

    params = params_of(optimizers)
    if gradients is not _directStepOptimizerSingleton:
        load_gradients(params, gradients, "apply_gradients")
    clear_grads(skip)
    try:
        for opt in optimizers:
            check_finite_update(None, opt)
        for opt in optimizers:
            for group in opt.param_groups:
                group["lr"] = getattr(policy, "cur_lr", group["lr"])
            step_optimizer(opt)
    finally:
        clear_grads(params)


def _gradient_methods(
    compute_gradients_fn: Callable | None, apply_gradients_fn: Callable | None
) -> dict[str, Any]:
    """`learn_step` (compute, process, apply the gradients of one minibatch through the
    hooks and the class's `extra_grad_process`, where `_processes_grads`), and the
    policy-level `compute_gradients` and `apply_gradients`."""
    from corral.core.learner.finite import check_finite_update, optimizers_of
    from corral.core.learner.learner import _backward, loss_and_stats
    from corral.utils.metrics.learner_info import LEARNER_STATS_KEY
    from corral.utils.torch_utils import clear_grads

    def grads_on_params(self, batch, optimizer, params) -> dict[str, Any]:
        """The loss's gradients left on `params`; returns the stats."""
        if compute_gradients_fn is not None:
            grads, info = compute_gradients_fn(self, batch)
            if isinstance(grads, (list, tuple)) and len(grads) == len(params):
                for param, grad in zip(params, grads):  # (returned, maybe not left there)
                    if grad is not None and grad is not param.grad:
                        param.grad = torch.as_tensor(
                            np.array(grad) if not torch.is_tensor(grad) else grad,
                            dtype=param.dtype,
                            device=param.device,
                        ).clone()
            info = dict(info or {})
            return dict(info.get(LEARNER_STATS_KEY, {}))
        if not self._processes_grads:
            return _backward(self, batch, params, optimizer)  # the learner's, with grad_clip
        loss, stats = loss_and_stats(self, self.loss(self.model, self.dist_class, batch), batch)
        clear_grads(params)
        loss.backward()
        check_finite_update(loss, optimizer, stats)
        stats.update(self.extra_grad_process(optimizer, loss) or {})
        return stats

    def learn_step(self, batch, optimizer):
        """One minibatch: the gradients (`compute_gradients_fn`, or the loss's, processed
        by `extra_grad_process`), then the step (`apply_gradients_fn` with
        `_directStepOptimizerSingleton`, or the optimiser's own)."""
        optimizers = optimizers_of(optimizer)
        self._optimizers = optimizers
        params = params_of(optimizers)
        stats = grads_on_params(self, batch, optimizer, params)
        if apply_gradients_fn is not None:
            for opt in optimizers:
                for group in opt.param_groups:
                    group["lr"] = getattr(self, "cur_lr", group["lr"])
            try:
                apply_gradients_fn(self, _directStepOptimizerSingleton)
            finally:
                clear_grads(params)
        else:
            step_with_gradients(self, optimizers, _directStepOptimizerSingleton)
        return stats

    # (The learner steps it like a policy's own `learn_step`; a class built on it is
    # still one whose updates come from its loss.)
    learn_step.hooked = True  # type: ignore[attr-defined]

    def compute_gradients(self, postprocessed_batch):
        """RLlib 1.13's: `compute_gradients_fn(policy, batch)`, else the loss's gradients
        (processed by `extra_grad_process`), one numpy array per parameter; the batch is
        padded to the divisibility requirement first."""
        if compute_gradients_fn is not None:
            return compute_gradients_fn(self, divisible_train_batch(self, postprocessed_batch))
        learner = self._own_learner()
        optimizer = learner.optimizers[_OWN_ID]
        self._optimizers = optimizers_of(optimizer)
        params = params_of(self._optimizers)
        minibatch = next(learner._minibatches(self, postprocessed_batch, 1, None, False, 0))
        try:
            stats = grads_on_params(self, minibatch, optimizer, params)
            grads = [None if p.grad is None else p.grad.detach().cpu().numpy() for p in params]
        finally:
            clear_grads(params)
        return grads, {LEARNER_STATS_KEY: convert_to_numpy(stats)}

    # (RLlib 1.13 returned `compute_gradients_fn`'s result as it was, without the fetches.)
    compute_gradients.adds_learn_fetches = compute_gradients_fn is not None  # type: ignore[attr-defined]

    def apply_gradients(self, gradients):
        """RLlib 1.13's: `apply_gradients_fn(policy, gradients)`, or one optimiser step
        with them; bumps `weights_seq`."""
        self._optimizers = None  # (not those of the last learner update)
        self._optimizers = current_optimizers(self)
        if apply_gradients_fn is not None:
            apply_gradients_fn(self, gradients)
        else:
            step_with_gradients(self, self._optimizers, gradients)
        self.bump_weights_seq()

    return {
        "learn_step": learn_step,
        "compute_gradients": compute_gradients,
        "apply_gradients": apply_gradients,
    }


def _own_learn_step(cls: type) -> bool:
    """Whether `cls` orders its own updates in a `learn_step` (SAC, DDPG, ...), not the
    one of `_gradient_methods`."""
    step = getattr(cls, "learn_step", None)
    return step is not None and not getattr(step, "hooked", False)


def _corral_own(method: Any) -> bool:
    """Whether `method` is corral's (an algorithm's own acting or updates), not a user's."""
    return str(getattr(method, "__module__", "") or "").startswith("corral.")


def _adding_learn_fetches(method: Callable[..., Any], name: str) -> Callable[..., Any]:
    """`method` (`learn_on_batch` or `compute_gradients`) with the policy's
    `extra_compute_grad_fetches()` added to the info it returns."""
    if name == "learn_on_batch":

        def learn_on_batch(self, postprocessed_batch):
            return with_learn_fetches(self, method(self, postprocessed_batch))

        wrapped: Callable[..., Any] = learn_on_batch
    else:

        def compute_gradients(self, postprocessed_batch):
            grads, info = method(self, postprocessed_batch)
            return grads, with_learn_fetches(self, info)

        wrapped = compute_gradients
    wrapped.__doc__ = method.__doc__
    wrapped.adds_learn_fetches = True  # type: ignore[attr-defined]
    return wrapped


def wire_override_points(cls: type[TorchPolicy]) -> None:
    """Wires a new `TorchPolicy` subclass's overrides of RLlib 1.13's methods into its
    code paths, once, at its creation (`TorchPolicy.__init_subclass__`); a class that
    overrides none of them keeps TorchPolicy's (the fast acting path, the learner's own
    gradient step):

    - `extra_action_out`: the class acts through `_acting_methods`' `compute_actions_from_obs`
      (RLlib 1.13's: the model's module call, these fetches with `action_dist_inputs`,
      `action_logp`, `action_prob`);
    - `extra_grad_process`: the learner steps it through `_gradient_methods`' `learn_step`,
      which calls it after `backward()` (in place of `grad_clip`'s clipping);
    - `extra_compute_grad_fetches`: `learn_on_batch` and `compute_gradients` add its dict
      (`Trainer.learner_info_from` does for a trainer's updates).

    Methods marked `default_path_hook` are not overrides (see there). A class that defines
    its own acting or `learn_step` beside an override keeps them.

    Raises:
        NotImplementedError: an override on a class that acts or updates through
            corral's own code for it (SAC, DDPG, ...), which has no place to call it.
    """
    if overrides_hook(cls, "extra_action_out"):
        acting = cls.compute_actions_from_obs
        if acting is TorchPolicy.compute_actions_from_obs:
            hooked = _acting_methods(None, None)["compute_actions_from_obs"]
            cls.compute_actions_from_obs = hooked  # type: ignore[method-assign]
        elif not getattr(acting, "calls_extra_action_out", False) and _corral_own(acting):
            raise NotImplementedError(
                f"{cls.__name__} overrides extra_action_out, but acts through "
                f"{acting.__qualname__}, which does not call it; it is built for policies "
                "acting through TorchPolicy's compute_actions_from_obs (PG, PPO, A2C/A3C, "
                "IMPALA, APPO, DQN, MARWIL/BC, your own TorchPolicy subclasses)."
            )
    cls._processes_grads = overrides_hook(cls, "extra_grad_process")
    step = getattr(cls, "learn_step", None)
    if cls._processes_grads and step is None:
        for name, method in _gradient_methods(None, None).items():
            if name not in cls.__dict__:
                setattr(cls, name, method)
    elif cls._processes_grads and step is not None and _own_learn_step(cls) and _corral_own(step):
        raise NotImplementedError(
            f"{cls.__name__} overrides extra_grad_process, but {step.__qualname__} "
            "orders its own updates, with no gradient step to call it in; it is built for "
            "policies the learner steps from their loss (TorchPolicy, PG, PPO, A2C, IMPALA, "
            "APPO, ...)."
        )
    cls._learn_fetches = overrides_hook(cls, "extra_compute_grad_fetches")
    if cls._learn_fetches:
        for name in ("learn_on_batch", "compute_gradients"):
            method = getattr(cls, name)
            own = name in cls.__dict__ and not _corral_own(method)
            if not own and not getattr(method, "adds_learn_fetches", False):
                setattr(cls, name, _adding_learn_fetches(method, name))


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


__all__ = [
    "build_policy_class",
    "class_loss",
    "current_optimizers",
    "params_of",
    "step_with_gradients",
    "store_tower_stats",
    "tower_stats",
]
