"""`Policy`: what acts in an env and how its experience is postprocessed.

A policy owns a model and an action distribution; it computes actions for a
batch of observations and turns raw trajectories into train batches (e.g.
GAE). Its gradient updates run in a `Learner` (`corral.core.learner`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import gymnasium as gym
import numpy as np

from corral.policy.sample_batch import SampleBatch

if TYPE_CHECKING:
    import torch

    from corral.evaluation.episode import Episode
    from corral.utils.exploration import Exploration


class PolicySpec(NamedTuple):
    """How to build one policy: class (None = the trainer's default), spaces
    (None = inferred from the env) and per-policy config overrides."""

    policy_class: type | None = None
    observation_space: gym.Space | None = None
    action_space: gym.Space | None = None
    config: dict | None = None


class Policy:
    """Base class of all policies (framework-independent part).

    Subclasses implement `compute_actions`; trainable ones also `loss` (see
    `TorchPolicy`).
    """

    # RLlib 1.13's `policy.framework` (corral's policies are all torch ones).
    framework: str = "torch"
    # True when `postprocess_trajectory` accepts a batch holding several
    # trajectories (told apart by eps_id); the sampler then postprocesses a
    # whole fragment in one call instead of one call per trajectory.
    postprocess_batched: bool = False

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        self.observation_space = observation_space
        self.action_space = action_space
        # RLlib 1.13's: the spaces as (nested) dicts/tuples of their leaf spaces.
        from corral.utils.spaces.space_utils import get_base_struct_from_space

        self.observation_space_struct = get_base_struct_from_space(observation_space)
        self.action_space_struct = get_base_struct_from_space(action_space)
        self.config = config
        self.global_timestep = 0
        # How many times the weights changed (updates, `set_weights` from a
        # checkpoint import, ...): the worker set sends a policy's weights to the
        # rollout workers only when this moved since the last sync.
        self.weights_seq = 0
        # RLlib 1.13's trajectory view API: column -> ViewRequirement. Policies add
        # their own (e.g. "state_in_0" read from "state_out_0" at shift -1).
        from corral.policy.view_requirement import default_view_requirements

        self.view_requirements = default_view_requirements(observation_space, action_space)

    def _get_default_view_requirements(self) -> dict:
        """RLlib 1.13's default view requirements of a policy: the columns every policy
        sees (observations, actions, rewards, dones, ids, ...)."""
        from corral.policy.view_requirement import default_view_requirements

        return default_view_requirements(self.observation_space, self.action_space)

    def _get_dummy_batch_from_view_requirements(self, batch_size: int = 1) -> SampleBatch:
        """RLlib 1.13's all-zero batch of `batch_size` rows with a column per view
        requirement: Tuple/Dict observations (actions) flat, as the preprocessor (the
        action flattening) gives them, unless `_disable_preprocessor_api`
        (`_disable_action_flattening`); shifted ranges with a time axis."""
        from corral.models.catalog import ModelCatalog
        from corral.utils.spaces.space_utils import get_dummy_batch_for_space

        config = self.config or {}
        columns: dict[str, Any] = {}
        for view_col, req in self.view_requirements.items():
            data_col = req.data_col or view_col
            space = req.space
            nested = isinstance(space, gym.spaces.Tuple | gym.spaces.Dict)
            if (
                nested
                and data_col == SampleBatch.OBS
                and not config.get("_disable_preprocessor_api")
            ):
                width = gym.spaces.utils.flatdim(space)
                columns[view_col] = np.zeros((batch_size, width), np.float32)
            elif (
                nested
                and data_col == SampleBatch.ACTIONS
                and not config.get("_disable_action_flattening")
            ):
                _, shape = ModelCatalog.get_action_shape(space)
                columns[view_col] = np.zeros((batch_size, *shape[1:]), np.float32)
            elif isinstance(req.shift, str | list | tuple):  # a time axis: "-3:0", [-2, 0]
                time = len(req.shift_arr)
                columns[view_col] = get_dummy_batch_for_space(space, batch_size, time_size=time)
            else:
                columns[view_col] = get_dummy_batch_for_space(space, batch_size, fill_value=0.0)
        return SampleBatch(columns)

    def _create_exploration(self) -> Exploration:
        """The `Exploration` of `config["exploration_config"]` (RLlib 1.13's helper for
        custom policies; `TorchPolicy` builds its own)."""
        from corral.utils.exploration import make_exploration

        return make_exploration(
            self.config.get("exploration_config"),
            self.action_space,
            self.config,
            getattr(self, "model", None),
            num_workers=int(self.config.get("num_workers", 0) or 0),
            worker_index=int(self.config.get("worker_index", 0) or 0),
        )

    # -- acting -------------------------------------------------------------

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
    ) -> tuple[Any, list, dict]:
        """Returns (actions, state_outs, extra_fetches) for a batch of obs."""
        raise NotImplementedError

    def compute_actions_from_input_dict(
        self,
        input_dict: dict[str, Any],
        explore: bool | None = None,
        timestep: int | None = None,
        episodes: list | None = None,
        **kwargs: Any,
    ) -> tuple[Any, list, dict]:
        """Batched actions for an input dict whose `obs` are already preprocessed.

        The trainer preprocesses and filters observations itself (as the
        sampler does), so this entry point must not preprocess again. Keys:
        `obs`, optional `prev_actions`, `prev_rewards`, `infos` and
        `state_in_<i>`. The default forwards to `compute_actions`.
        """
        return self.compute_actions(
            input_dict[SampleBatch.OBS],
            state_batches_of(input_dict),
            prev_action_batch=input_dict.get(SampleBatch.PREV_ACTIONS),
            prev_reward_batch=input_dict.get(SampleBatch.PREV_REWARDS),
            info_batch=input_dict.get(SampleBatch.INFOS),
            episodes=episodes,
            explore=explore,
            timestep=timestep,
            **kwargs,
        )

    def compute_single_action(
        self,
        obs: Any = None,
        state: list | None = None,
        *,
        prev_action: Any = None,
        prev_reward: Any = None,
        info: dict | None = None,
        input_dict: dict | None = None,
        episode: Episode | None = None,
        explore: bool | None = None,
        timestep: int | None = None,
        **kwargs: Any,
    ) -> tuple[Any, list, dict]:
        """Single-observation version of `compute_actions` (unbatched output)."""
        if input_dict is not None:
            obs = input_dict[SampleBatch.OBS]
            state = state or [v for k, v in sorted(input_dict.items()) if k.startswith("state_in_")]
            prev_action = input_dict.get(SampleBatch.PREV_ACTIONS, prev_action)
            prev_reward = input_dict.get(SampleBatch.PREV_REWARDS, prev_reward)
        state_batch = [np.expand_dims(s, 0) for s in (state or [])]
        actions, state_out, extra = self.compute_actions(
            np.expand_dims(np.asarray(obs), 0),
            state_batch,
            prev_action_batch=None if prev_action is None else [prev_action],
            prev_reward_batch=None if prev_reward is None else [prev_reward],
            info_batch=None if info is None else [info],
            episodes=None if episode is None else [episode],
            explore=explore,
            timestep=timestep,
            **kwargs,
        )
        action = _unbatch_first(actions)
        return (
            action,
            [s[0] for s in state_out],
            {k: _unbatch_first(v) for k, v in extra.items()},
        )

    # -- experience ---------------------------------------------------------

    def postprocess_trajectory(
        self,
        sample_batch: SampleBatch,
        other_agent_batches: dict | None = None,
        episode: Episode | None = None,
    ) -> SampleBatch:
        """Adds training columns (advantages, n-step returns, ...); default: none."""
        return sample_batch

    def compute_log_likelihoods(
        self,
        actions: Any,
        obs_batch: Any,
        state_batches: list | None = None,
        prev_action_batch: Any = None,
        prev_reward_batch: Any = None,
        actions_normalized: bool = True,
    ) -> Any:
        """The log-likelihoods `[B]` of `actions` for `obs_batch` under this policy's
        action distribution (`actions_normalized=False`: the actions are in the env's
        bounds and get normalised first, with `normalize_actions`). See `TorchPolicy`."""
        raise NotImplementedError(f"{type(self).__name__} does not compute log-likelihoods.")

    def loss(self, model: Any, dist_class: type, train_batch: SampleBatch) -> Any:
        """The loss tensor (or list of them) of `train_batch` (see `TorchPolicy`)."""
        raise NotImplementedError(f"{type(self).__name__} has no loss.")

    def load_batch_into_buffer(self, batch: SampleBatch, buffer_index: int = 0) -> int:
        """RLlib 1.13's multi-device API: loads `batch` for `learn_on_loaded_batch`;
        returns the rows loaded (see `TorchPolicy`)."""
        raise NotImplementedError(f"{type(self).__name__} does not load batches.")

    def get_num_samples_loaded_into_buffer(self, buffer_index: int = 0) -> int:
        """How many rows `load_batch_into_buffer` loaded into buffer `buffer_index`."""
        raise NotImplementedError(f"{type(self).__name__} does not load batches.")

    def learn_on_loaded_batch(self, offset: int = 0, buffer_index: int = 0) -> dict:
        """One update on the loaded rows from `offset` (a minibatch of
        `sgd_minibatch_size` rows, or all of them); returns the learner stats."""
        raise NotImplementedError(f"{type(self).__name__} does not load batches.")

    def learn_on_batch_from_replay_buffer(self, replay_actor: Any, policy_id: str) -> dict:
        """RLlib 1.13's: one update on a batch replayed from `replay_actor` (a
        `ReplayActor` of `corral.utils.actors`, or a local replay buffer); {} when it
        has nothing to replay yet."""
        replay = replay_actor.replay
        remote = getattr(replay, "remote", None)
        if remote is not None:  # a Ray actor handle
            import ray

            batch = ray.get(remote(policy_id=policy_id))
        else:
            batch = replay(policy_id=policy_id)
        policy_batches = getattr(batch, "policy_batches", None)
        if policy_batches is not None:  # corral's buffers replay MultiAgentBatches
            batch = policy_batches.get(policy_id)
        if batch is None or batch.count == 0:
            return {}
        return self.learn_on_batch(batch)

    def learn_on_batch(self, samples: SampleBatch) -> dict:
        """One update on `samples` through this policy's learner."""
        raise NotImplementedError(f"{type(self).__name__} cannot learn.")

    def make_optimizer(self) -> torch.optim.Optimizer | dict[str, torch.optim.Optimizer]:
        """The optimiser (or dict of them, for a `learn_step`) a `Learner` trains this
        policy with (see `corral.core.learner.policy_protocol`)."""
        raise NotImplementedError(f"{type(self).__name__} cannot learn.")

    def after_update(self, stats: dict[str, Any]) -> dict[str, Any]:
        """Runs once after each `Learner.update` with its mean stats; returns stats to log."""
        return {}

    def compute_gradients(
        self, postprocessed_batch: SampleBatch
    ) -> tuple[list[np.ndarray | None], dict]:
        """(gradients, info) of the loss on a batch, without a step (see `TorchPolicy`)."""
        raise NotImplementedError(f"{type(self).__name__} cannot compute gradients.")

    def apply_gradients(self, gradients: Sequence[np.ndarray | torch.Tensor | None]) -> None:
        """One optimiser step with gradients from `compute_gradients` (see `TorchPolicy`)."""
        raise NotImplementedError(f"{type(self).__name__} cannot apply gradients.")

    def bump_weights_seq(self) -> None:
        """Records that the weights changed, so the next weight sync sends them.

        Called by whatever changes the weights in place: the `Learner` after each
        update, `apply_gradients`, an imported model.
        """
        self.weights_seq += 1

    def get_exploration_state(self) -> dict[str, Any]:
        """The state of the policy's `Exploration`, as RLlib 1.13 reports it: its
        current values (`cur_epsilon` of `EpsilonGreedy`, `cur_scale` of
        `GaussianNoise`, ...) with what it saves (`last_timestep`, ...); {} without one."""
        exploration = getattr(self, "exploration", None)
        if exploration is None:
            return {}
        return {**exploration.get_info(), **exploration.get_state()}

    def get_exploration_info(self) -> dict[str, Any]:
        """Deprecated in RLlib 1.13: `get_exploration_state`."""
        from corral.utils.deprecation import deprecation_warning_once

        deprecation_warning_once("Policy.get_exploration_info", "get_exploration_state")
        return self.get_exploration_state()

    def apply(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        """`func(self, *args, **kwargs)` (RLlib's way to run code on a policy that may
        live in a worker process: `worker.foreach_policy` / `policy.apply`)."""
        return func(self, *args, **kwargs)

    def get_session(self) -> None:
        """The TensorFlow session of a TF policy: None for corral's (torch) policies."""
        return None

    def get_host(self) -> str:
        """The name of the machine this policy lives on (as `platform.node()`)."""
        import platform

        return platform.node()

    def on_global_var_update(self, global_vars: dict) -> None:
        """Called with e.g. {"timestep": n} before each round of sampling."""
        self.global_timestep = global_vars.get("timestep", self.global_timestep)

    # -- state --------------------------------------------------------------

    def get_weights(self) -> dict[str, np.ndarray]:
        """The model's weights as numpy arrays (name -> array)."""
        return {}

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Loads weights as `get_weights` returns them."""
        pass

    def get_state(self) -> dict[str, Any]:
        """Weights plus everything else needed to resume (JSON-able extras)."""
        return {"weights": self.get_weights(), "global_timestep": self.global_timestep}

    def set_state(self, state: dict[str, Any]) -> None:
        """Loads what `get_state` returned."""
        self.set_weights(state["weights"])
        self.global_timestep = state.get("global_timestep", 0)

    def get_initial_state(self) -> list[np.ndarray]:
        """The RNN state at an episode's start, one array per state tensor."""
        return []

    def is_recurrent(self) -> bool:
        """Whether the policy carries a state from step to step."""
        return False

    def num_state_tensors(self) -> int:
        """How many state tensors `get_initial_state` returns."""
        return len(self.get_initial_state())

    def export_model(self, export_dir: str, onnx: int | None = None) -> None:
        """Writes the model for serving (see `TorchPolicy.export_model`)."""
        raise NotImplementedError(f"{type(self).__name__} does not support export_model.")

    def export_checkpoint(self, export_dir: str, filename_prefix: str = "model") -> None:
        """Writes the policy's state (see `TorchPolicy.export_checkpoint`)."""
        raise NotImplementedError(f"{type(self).__name__} does not support export_checkpoint.")

    def import_model_from_h5(self, import_file: str) -> None:
        """Loads weights from an HDF5 file (see `TorchPolicy.import_model_from_h5`)."""
        raise NotImplementedError(f"{type(self).__name__} does not support h5 import.")


# The experimental switches RLlib 1.13's `Trainer.validate_config` copies from the top
# level of the config into the model config, so that models know whether their inputs
# are preprocessed and their actions flattened.
MODEL_FLAGS = ("_disable_preprocessor_api", "_disable_action_flattening")


def with_model_flags(config: dict) -> dict:
    """`config` with each of `MODEL_FLAGS` set (True) at the top level or in its `model`
    set in both (a new dict where that changes anything)."""
    model = config.get("model") or {}
    on = [k for k in MODEL_FLAGS if config.get(k) or model.get(k)]
    if all(config.get(k) is True and model.get(k) is True for k in on):
        return config
    return {**config, **dict.fromkeys(on, True), "model": {**model, **dict.fromkeys(on, True)}}


def nests_actions(policy: Any) -> bool:
    """Whether `policy`'s batches hold its actions nested (`_disable_action_flattening`
    with a Tuple/Dict action space; other spaces have nothing to flatten)."""
    config = getattr(policy, "config", None) or {}
    return bool(config.get("_disable_action_flattening")) and isinstance(
        getattr(policy, "action_space", None), gym.spaces.Tuple | gym.spaces.Dict
    )


def with_nested_actions(policy: Any, batch: SampleBatch) -> SampleBatch:
    """`batch`, its flat `actions` / `prev_actions` rows replaced (in place) by the nested
    structure of `policy`'s action space where the policy keeps them so
    (`nests_actions`)."""
    if not nests_actions(policy):
        return batch
    from corral.utils.spaces import is_nested_action, nest_action_rows

    for key in (SampleBatch.ACTIONS, SampleBatch.PREV_ACTIONS):
        if key in batch and not is_nested_action(batch[key]):
            batch[key] = nest_action_rows(policy.action_space, batch[key])
    return batch


def declared_for(policy: object, attr: str, method: str) -> bool:
    """Whether the class attribute `attr` of `policy` was set at or below the class that
    defines `method`: a user subclass that overrides `loss` (or
    `postprocess_trajectory`) must not inherit a claim its parent made about its own
    method (e.g. the columns PPO's loss reads, or that PPO's postprocessing takes a
    whole fragment)."""
    mro = type(policy).__mro__
    method_owner = next((c for c in mro if method in c.__dict__), None)
    attr_owner = next((c for c in mro if attr in c.__dict__), None)
    return (
        method_owner is not None and attr_owner is not None and issubclass(attr_owner, method_owner)
    )


def learns_by_itself(policy: Any) -> bool:
    """Whether `policy` is a `Policy` of one's own that overrides RLlib's `learn_on_batch`
    and gives corral's `Learner` nothing to train (no `make_optimizer`): the trainers then
    call its `learn_on_batch` with each train batch, as RLlib 1.13's `train_one_step`
    did (a `TorchPolicy` learns through the learner)."""
    cls = type(policy)
    return (
        getattr(cls, "learn_on_batch", Policy.learn_on_batch) is not Policy.learn_on_batch
        and getattr(cls, "make_optimizer", Policy.make_optimizer) is Policy.make_optimizer
    )


def state_batches_of(input_dict: dict[str, Any]) -> list:
    """The `state_in_<i>` columns of an input dict, ordered by `i`."""
    keys = [k for k in input_dict if k.startswith("state_in_")]
    return [input_dict[k] for k in sorted(keys, key=lambda k: int(k[len("state_in_") :]))]


def _unbatch_first(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return type(value)(_unbatch_first(v) for v in value)
    if isinstance(value, dict):
        return {k: _unbatch_first(v) for k, v in value.items()}
    return value[0]
