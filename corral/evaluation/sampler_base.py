"""What the single-agent and the multi-agent sampler share: everything around their loops.

The two samplers keep their own hot loops (`sampler.SingleAgentSampler` writes
`[T, num_envs]` buffers with no per-step dicts; `multi_agent_sampler.MultiAgentSampler`
keeps one trajectory per agent). Everything else is written once, here:

- `SamplerBase`: the config both read, episode ids, the episode start/end callbacks
  and metrics, `get_metrics`, timers, rendering and sub-env restarts;
- `EpisodeEndRule`: RLlib's `horizon` / `soft_horizon` / `no_done_at_end` rule, on
  Gymnasium's terminated/truncated flags;
- `WholeEpisodeWait`: `complete_episodes`' warning when no episode ends;
- `reward_clip_bounds` / `clip_rewards_in_place`: `clip_rewards`;
- `postprocess_trajectory`: a policy's `postprocess_trajectory` with the
  `on_postprocess_trajectory` callback, for one agent's trajectory;
- `reward_error`: the error for a NaN/inf reward, or one that is no number.
"""

from __future__ import annotations

import functools
import logging
import numbers
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from corral.env.gym_compat import check_reset_output, env_name
from corral.evaluation.episode import Episode
from corral.evaluation.metrics import RolloutMetrics
from corral.policy.policy import with_nested_actions
from corral.policy.sample_batch import SampleBatch
from corral.utils.error import EnvError
from corral.utils.exploration.exploration import overrides
from corral.utils.spaces import as_flat_action_rows, unflatten_actions
from corral.utils.spaces.space_utils import clip_action, unsquash_action

# The columns both samplers write themselves (plus the previous action and reward for
# stateful policies): a trajectory view of any other column, or with a shift, is built
# from these by `corral.policy.view_requirement`.
_SAMPLER_COLUMNS = frozenset(
    {
        SampleBatch.OBS,
        SampleBatch.NEXT_OBS,
        SampleBatch.ACTIONS,
        SampleBatch.REWARDS,
        SampleBatch.TERMINATEDS,
        SampleBatch.TRUNCATEDS,
        SampleBatch.DONES,
        SampleBatch.EPS_ID,
        SampleBatch.T,
        SampleBatch.ENV_ID,
        SampleBatch.AGENT_INDEX,
    }
)


def sampler_columns(recurrent: bool) -> set[str]:
    """The columns a sampler writes itself for a (`recurrent` or feed-forward) policy."""
    if recurrent:
        return set(_SAMPLER_COLUMNS) | {SampleBatch.PREV_ACTIONS, SampleBatch.PREV_REWARDS}
    return set(_SAMPLER_COLUMNS)


logger = logging.getLogger(__name__)


def initial_state_of(policy: Any) -> list[np.ndarray]:
    """`policy.get_initial_state()`; for a recurrent policy (`is_recurrent()`) whose
    `get_initial_state()` is empty, zeros of the spaces of its `state_in_<i>` view
    requirements that read `state_out_<i>` at the last step (RLlib 1.13's collectors
    filled a state input from its requirement's space, zeros at an episode's start)."""
    state = [np.asarray(s) for s in policy.get_initial_state()]
    if state or not policy.is_recurrent():
        return state
    reqs = dict(getattr(getattr(policy, "model", None), "view_requirements", None) or {})
    reqs.update(getattr(policy, "view_requirements", None) or {})
    while True:
        vr: Any = reqs.get(f"state_in_{len(state)}")
        space: Any = getattr(vr, "space", None)
        shape = getattr(space, "shape", None)
        if shape is None or vr.data_col != f"state_out_{len(state)}" or vr.shift != -1:
            return state
        state.append(np.zeros(shape, space.dtype))


def object_state_indices(initial_state: Sequence[np.ndarray]) -> tuple[int, ...]:
    """Which of a policy's states (`initial_state_of`) are Python objects rather than
    arrays: RLlib 1.13 let a `Policy` of one's own keep any value as a state (e.g.
    `get_initial_state()` returning `[{}]`), sampled as it is in the `state_in_<i>` /
    `state_out_<i>` columns. The samplers keep those in object arrays, one value a row."""
    return tuple(i for i, s in enumerate(initial_state) if s.dtype == object)


def state_size_hint(column: str) -> str:
    """What the samplers' shape errors add for a state column (`state_in_<i>` /
    `state_out_<i>`): how to keep a state whose size changes; "" for other columns."""
    if not column.startswith(("state_in_", "state_out_")):
        return ""
    return (
        " (a state that changes size is a Python object: make get_initial_state() return "
        "it as one, e.g. a dict or a string)"
    )


def object_rows(values: Any, n: int) -> np.ndarray:
    """The first `n` rows of a batch of Python objects (`values[i]` for row `i`) as a
    1-D object array (`np.asarray` would turn lists into a numeric array, strings into
    a fixed-width one)."""
    out = np.empty(n, object)
    for i in range(n):
        out[i] = values[i]
    return out


def complete_state_outs(
    extra: dict, states: Sequence[np.ndarray], object_indices: tuple[int, ...], n: int
) -> dict:
    """The extra fetches of `n` rows of a `Policy` of one's own that got `states`, with
    a `state_out_<i>` for each: the state it got where it returned none (RLlib 1.13 fed
    such a policy the same state again), and those of its object states
    (`object_state_indices`) as 1-D object arrays, one value a row."""
    extra = dict(extra)
    for i, state in enumerate(states):
        key = f"state_out_{i}"
        if key not in extra:
            extra[key] = state
        elif i in object_indices:
            extra[key] = object_rows(extra[key], n)
    return extra


# How many rebuilt copies of a sub-env may raise in a row (in reset()) before
# the sampler gives up on it.
MAX_SUB_ENV_RESTARTS_IN_A_ROW = 3


class SamplerTimers:
    """Mean milliseconds per step of each part of the loop (RLlib's sampler_perf)."""

    __slots__ = ("env_wait", "inference", "processing", "render", "steps")

    def __init__(self) -> None:
        self.env_wait = self.inference = self.processing = self.render = 0.0
        self.steps = 0

    def as_dict(self) -> dict[str, float]:
        n = max(self.steps, 1)
        return {
            "mean_env_wait_ms": 1000 * self.env_wait / n,
            "mean_inference_ms": 1000 * self.inference / n,
            "mean_action_processing_ms": 1000 * self.processing / n,
            "mean_raw_obs_processing_ms": 0.0,
            "mean_env_render_ms": 1000 * self.render / n,
        }


class EpisodeEndRule:
    """RLlib's horizon rule, mapped onto Gymnasium's terminated/truncated flags.

    - a `horizon` cut (the episode reached `horizon` steps and the env did not end
      it itself) is a truncation: the episode ends, values bootstrap;
    - `soft_horizon`: the cut is a truncation too, but the env is not reset: the
      next episode (metrics, episode id) goes on from the env's current state. As in
      RLlib 1.13's sampler (which recorded `done=False` at a soft cut, whatever its
      config docs said), the cut step's value bootstraps;
    - `no_done_at_end`: no step is ever marked terminated (episode ends become
      truncations, so value targets bootstrap through them).

    The batch's `dones` column is RLlib 1.13's flag (`dones`): the episode's end,
    except at a soft horizon's cut and with `no_done_at_end`, where 1.13 recorded
    `done=False`. Both samplers apply the rule to numpy arrays: one entry per sub-env
    (single-agent) or per agent whose transition closes (multi-agent).
    """

    def __init__(self, horizon: Any, soft_horizon: Any, no_done_at_end: Any) -> None:
        # None (or 0): no cut of corral's; Gymnasium's TimeLimit truncates at
        # the env's max_episode_steps anyway.
        self.horizon = int(horizon) if horizon else None
        self.soft_horizon = bool(soft_horizon)
        self.no_done_at_end = bool(no_done_at_end)
        # Whether `mark` changes anything (the single-agent loop skips it when not).
        self.active = self.horizon is not None or self.no_done_at_end
        # Whether `dones` can differ from `terminateds | truncateds` row by row (a soft
        # horizon's cut), so that the samplers record it per step.
        self.keeps_dones = (
            self.soft_horizon and self.horizon is not None and not self.no_done_at_end
        )

    @classmethod
    def from_config(cls, config: dict) -> EpisodeEndRule:
        return cls(config.get("horizon"), config.get("soft_horizon"), config.get("no_done_at_end"))

    def cut(self, length: Any, env_done: Any) -> Any:
        """Where the horizon cuts an episode: `length` reached the horizon and the env
        did not end the episode itself (arrays or scalars; None without a horizon)."""
        if self.horizon is None:
            return None
        return np.logical_and(np.greater_equal(length, self.horizon), np.logical_not(env_done))

    def mark(self, terminated: np.ndarray, truncated: np.ndarray, cut: np.ndarray | None) -> None:
        """Sets the flags of episode ends in place: cut rows become truncations, and
        `no_done_at_end` turns terminations into truncations."""
        if cut is not None:
            truncated |= cut
        if self.no_done_at_end:
            truncated |= terminated
            terminated[...] = False

    def dones(self, terminated: np.ndarray, truncated: np.ndarray, cut: Any) -> np.ndarray:
        """RLlib 1.13's `dones` of rows already `mark`ed: the episode's end, except
        where 1.13's sampler recorded `done=False`: at a soft horizon's cut, and on
        every row with `no_done_at_end`. (1.x code reads `dones[-1]` to decide whether
        to bootstrap; corral's own algorithms read `terminateds`.)"""
        if self.no_done_at_end:
            return np.zeros_like(terminated)
        done = terminated | truncated
        if self.soft_horizon and cut is not None:
            done &= ~cut
        return done

    def fill_dones(self, columns: dict[str, Any]) -> None:
        """Sets `columns`' `dones` from its `terminateds` / `truncateds`, unless the
        sampler recorded it per step (`keeps_dones`: the rows carry it already)."""
        if SampleBatch.DONES not in columns:
            columns[SampleBatch.DONES] = self.dones(
                columns[SampleBatch.TERMINATEDS], columns[SampleBatch.TRUNCATEDS], None
            )

    def resets_env(self, cut: Any) -> bool:
        """Whether an episode that ended with this `cut` flag resets its env (a soft
        horizon keeps the env running)."""
        return not (self.soft_horizon and cut is not None and bool(cut))


class WholeEpisodeWait:
    """`batch_mode="complete_episodes"`: `sample()` hands out whole episodes only, so an
    env whose episodes never end (no termination, no `horizon`) makes it step forever, as
    RLlib 1.13's did. `stepped` counts one `sample()`'s env steps and warns once per
    sampler when `limit` of them (the larger of 100,000 and 100 fragments) ended no
    episode; the sampling goes on (long episodes are legitimate)."""

    MIN_STEPS = 100_000

    def __init__(self, target: int) -> None:
        self.limit = max(self.MIN_STEPS, 100 * target)
        self.warned = False

    def stepped(self, steps: int, episodes_ready: bool) -> None:
        """`steps` env steps into this `sample()`; `episodes_ready`: one has ended."""
        if self.warned or episodes_ready or steps < self.limit:
            return
        self.warned = True
        logger.warning(
            "batch_mode='complete_episodes': %s env steps into this sample() and no episode "
            "has ended; sample() hands out whole episodes only. If this env's episodes never "
            "end, set `horizon` (a cut ends an episode) or batch_mode='truncate_episodes'.",
            f"{steps:,}",
        )


def reward_clip_bounds(clip_rewards: Any, env: Any) -> tuple[float | None, float] | None:
    """What `clip_rewards` means for `env`: None (no clipping), `(None, 0)` (sign), or
    `(low, high)` bounds.

    RLlib's rule: None clips to the sign for Atari envs only (the DQN paper's reward
    scale), True always does, a number `v > 0` clips to `[-v, v]`, a pair to its bounds.
    """
    if clip_rewards is None:
        from corral.env.utils import is_atari

        return (None, 0.0) if is_atari(env) else None
    if clip_rewards is True:
        return (None, 0.0)
    if clip_rewards is False:
        return None
    if isinstance(clip_rewards, (tuple, list)) and len(clip_rewards) == 2:
        low, high = float(clip_rewards[0]), float(clip_rewards[1])
        if low > high:
            raise ValueError(f"clip_rewards={clip_rewards!r}: the low bound exceeds the high one.")
        return (low, high)
    if isinstance(clip_rewards, (int, float)):
        return (-float(clip_rewards), float(clip_rewards)) if clip_rewards > 0 else None
    raise ValueError(
        f"clip_rewards={clip_rewards!r}: expected None, True, False, a positive number or a "
        "(low, high) pair."
    )


def clip_rewards_in_place(rewards: np.ndarray, bounds: tuple[float | None, float] | None) -> None:
    """Applies `reward_clip_bounds`' result to a reward column (after the metrics took
    the raw rewards: episode returns stay unclipped)."""
    if bounds is None:
        return
    low, high = bounds
    if low is None:
        np.sign(rewards, out=rewards)
    else:
        np.clip(rewards, low, high, out=rewards)


def reward_error(
    env: Any, env_index: int, worker_index: int, value: Any, agent: Any = None
) -> EnvError:
    """The error for a reward from `env.step()` that is no finite number: NaN or inf, or
    no number at all (an array, None, ...)."""
    who = f"agent {agent!r} of " if agent is not None else ""
    if isinstance(value, numbers.Real):
        what = f"a NaN or inf reward ({value})"
    else:
        what = f"the reward {value!r} (a {type(value).__name__}; expected a number)"
    return EnvError(
        f"Env '{env_name(env, short=True)}' ({who}sub-env {env_index} of worker "
        f"{worker_index}) returned {what} from step()."
    )


def flag_error(env: Any, env_index: int, worker_index: int, name: str, value: Any) -> EnvError:
    """The error for a `terminated` / `truncated` flag from `env.step()` that is true
    but no bool (a str, 2, 0.5: numpy and Python would disagree on whether it ended
    the episode)."""
    return EnvError(
        f"Env '{env_name(env, short=True)}' (sub-env {env_index} of worker {worker_index}) "
        f"returned {name}={value!r} (a {type(value).__name__}; expected a bool) from step()."
    )


def as_fetches(
    action_space: Any, actions: Any, state_out: Any, extra: Any
) -> tuple[np.ndarray, dict]:
    """`compute_actions`-style results as the samplers keep them: actions as an array
    (flat rows for a Tuple/Dict `action_space`, whichever of RLlib's forms they came in:
    `as_flat_action_rows`), the extra fetches as arrays with the RNN states out as
    `state_out_<i>`."""
    fetches = {k: np.asarray(v) for k, v in (extra or {}).items()}
    rows = as_flat_action_rows(action_space, actions)
    for j, s in enumerate(state_out or []):
        # (RLlib 1.13 read row i of each state output for env i: rows past the batch
        # were never read.)
        fetches[f"state_out_{j}"] = np.asarray(s)[: len(rows)]
    return rows, fetches


def policy_actions(
    policy: Any,
    obs: np.ndarray,
    explore: bool,
    state: list[np.ndarray] | None = None,
    prev_actions: np.ndarray | None = None,
    prev_rewards: np.ndarray | None = None,
    view_inputs: dict[str, np.ndarray] | None = None,
    takes_views: bool = False,
    infos: list[dict] | None = None,
) -> tuple[np.ndarray, dict]:
    """Actions and extra fetches (with `state_out_<i>`) of a batch of preprocessed
    observations; `state` etc. for stateful policies; `view_inputs`: extra view
    columns (passed as `view_inputs` when `takes_views`, else in an input dict, with
    the `infos` given)."""
    if view_inputs is not None:
        return actions_with_views(
            policy,
            obs,
            explore,
            view_inputs,
            takes_views,
            state,
            prev_actions,
            prev_rewards,
            infos,
        )
    fast = getattr(policy, "compute_actions_from_obs", None)
    if fast is not None:
        if state is None:
            return fast(obs, explore)
        return fast(obs, explore, state, prev_actions, prev_rewards)
    return as_fetches(
        policy.action_space,
        *policy.compute_actions(
            obs,
            state_batches=state,
            prev_action_batch=prev_actions,
            prev_reward_batch=prev_rewards,
            explore=explore,
        ),
    )


def acting_of(policy: Any) -> Callable[..., tuple[np.ndarray, dict]]:
    """`policy`'s `compute_actions_from_obs(obs, explore[, state, prev_actions,
    prev_rewards])` (a `TorchPolicy`'s own), or, for a `Policy` of one's own with only
    RLlib's `compute_actions`, the same through :func:`policy_actions`."""
    fast = getattr(policy, "compute_actions_from_obs", None)
    if fast is not None:
        return fast  # type: ignore[no-any-return]
    return functools.partial(policy_actions, policy)


def to_env_of(policy: Any) -> Callable[[np.ndarray, bool, bool], Any]:
    """`to_env(actions, unsquash, clip)`: the env's actions of a batch of `policy`'s
    actions. A `TorchPolicy`'s `to_env_actions` (normalised Box actions unsquashed /
    clipped, nested ones rebuilt), or for a `Policy` of one's own, as RLlib 1.13's
    sampler did for any policy: Box actions unsquashed from [-1, 1] onto the space's
    bounds (`normalize_actions`, bounded Boxes) or else clipped (`clip_actions`), its
    flat-kept Tuple/Dict actions rebuilt (their Box leaves likewise), the rest as they
    are. The batch keeps the actions the policy returned."""
    to_env = getattr(policy, "to_env_actions", None)
    if to_env is not None:
        return to_env  # type: ignore[no-any-return]
    space = policy.action_space
    if isinstance(space, gym.spaces.Tuple | gym.spaces.Dict):
        return functools.partial(unflatten_actions, space)
    if isinstance(space, gym.spaces.Box):
        return functools.partial(_box_actions_to_env, space)
    return lambda actions, unsquash, clip: actions


def read_only(actions: Any) -> Any:
    """`actions` for the env: a read-only view of an array (other values as they are).

    RLlib 1.13 made actions immutable before `env.step`: an env that changes its action
    in place fails there, instead of changing the batch's (or an episode's) action,
    which may be the same memory."""
    if type(actions) is np.ndarray:
        actions = actions.view()
        actions.setflags(write=False)  # (half the cost of `flags.writeable = False`)
    return actions


def _box_actions_to_env(space: gym.spaces.Box, actions: Any, unsquash: bool, clip: bool) -> Any:
    """A batch of a `Policy` of one's own's Box actions for the env (`to_env_of`)."""
    if unsquash:
        return unsquash_action(np.asarray(actions), space)
    if clip:
        return clip_action(np.asarray(actions), space)
    return actions


def actions_with_views(
    policy: Any,
    obs: np.ndarray,
    explore: bool,
    view_inputs: dict[str, np.ndarray],
    takes_views: bool,
    state: list[np.ndarray] | None = None,
    prev_actions: np.ndarray | None = None,
    prev_rewards: np.ndarray | None = None,
    infos: list[dict] | None = None,
) -> tuple[np.ndarray, dict]:
    """One step's actions and fetches with trajectory-view columns for the model:
    passed as `view_inputs` to a policy whose `compute_actions_from_obs` takes them
    (`takes_views`), else in the input dict of `compute_actions_from_input_dict`
    (with the RNN state, unless a view gives it at other shifts, the previous
    action/reward of a stateful policy, and the `infos` given)."""
    if takes_views:
        recurrent = () if state is None else (state, prev_actions, prev_rewards)
        return policy.compute_actions_from_obs(obs, explore, *recurrent, view_inputs=view_inputs)
    input_dict: dict[str, Any] = {SampleBatch.OBS: obs, **view_inputs}
    if state is not None:
        for j, s in enumerate(state):
            input_dict.setdefault(f"state_in_{j}", s)
        input_dict[SampleBatch.PREV_ACTIONS] = prev_actions
        input_dict[SampleBatch.PREV_REWARDS] = prev_rewards
    if infos is not None:
        input_dict[SampleBatch.INFOS] = np.array(infos, dtype=object)
    return as_fetches(
        policy.action_space, *policy.compute_actions_from_input_dict(input_dict, explore=explore)
    )


# The next `unroll_id` of this process (RLlib 1.13 counted them per process too).
_next_unroll_id = 0
_unroll_id_lock = threading.Lock()  # (async and external-env samplers run in threads)


def add_unroll_ids(batch: SampleBatch) -> None:
    """Adds RLlib 1.13's `unroll_id` column to a sampled `batch` in place: one new id,
    unique in this process, per trajectory piece (a run of rows of one episode: what a
    sampler hands out of an episode at a time), increasing with sampling. Kept when the
    batch has one already.
    """
    global _next_unroll_id
    n = batch.count
    if SampleBatch.UNROLL_ID in batch or not n:
        return
    if n == 1:  # (one-step fragments of off-policy algorithms: no arrays to compare)
        with _unroll_id_lock:
            unroll_id = _next_unroll_id
            _next_unroll_id += 1
        batch[SampleBatch.UNROLL_ID] = np.array([unroll_id], np.int64)
        return
    starts = np.zeros(n, np.int64)
    starts[0] = 1
    if SampleBatch.EPS_ID in batch:
        eps_id = np.asarray(batch[SampleBatch.EPS_ID])
        starts[1:] = eps_id[1:] != eps_id[:-1]
    pieces = np.cumsum(starts)
    with _unroll_id_lock:
        first = _next_unroll_id
        _next_unroll_id += int(pieces[-1])
    batch[SampleBatch.UNROLL_ID] = pieces + (first - 1)


def training_disabled(info: Any) -> bool:
    """RLlib 1.x's `training_enabled` info: whether an env step's info dict says the
    episode is not to be trained on (the key falsy). An episode piece whose last info
    says so is acted on and counted in the metrics, but left out of the sampled batch
    (1.13's `postprocess_episode` skipped it; an `ExternalEnv` says it per episode)."""
    return isinstance(info, dict) and not info.get("training_enabled", True)


def postprocess_trajectory(
    sampler: Any,
    policy_id: str,
    agent_id: Any,
    batch: SampleBatch,
    episode: Episode | None,
    other_agent_batches: dict[Any, tuple[Any, SampleBatch]] | None = None,
) -> SampleBatch:
    """One agent's trajectory postprocessed by its policy (GAE, n-step, ...), then
    shown to `on_postprocess_trajectory` (when the callbacks override it).

    Args:
        sampler: the sampler (its worker, callbacks and `call_postprocess_hook`).
        policy_id: the policy that acted (and postprocesses).
        agent_id: the agent (`SINGLE_AGENT_ID` for single-agent envs).
        batch: the trajectory; a single-agent fragment of several trajectories when
            the policy postprocesses batched (`Policy.postprocess_batched`).
        episode: the trajectory's episode (None for a batched fragment).
        other_agent_batches: RLlib 1.13's `{agent_id: (policy, batch)}` of the
            other agents of the same episode.
    """
    worker = sampler.worker
    policy_map = worker.policy_map
    policy = policy_map[policy_id]
    add_unroll_ids(batch)
    others = other_agent_batches if other_agent_batches is not None else {}
    # `_disable_action_flattening`: the policy sees (and the batch keeps) nested actions.
    batch = with_nested_actions(policy, batch)
    others = {a: (p, with_nested_actions(p, b)) for a, (p, b) in others.items()}
    # RLlib 1.13: the exploration sees the trajectory first (e.g. ParameterNoise adapts
    # its noise scale), when its class overrides the hook.
    exploration = getattr(policy, "exploration", None)
    if exploration is not None and overrides(exploration, "postprocess_trajectory"):
        batch = exploration.postprocess_trajectory(policy, batch)
    hook = sampler.call_postprocess_hook
    original = batch.copy() if hook else batch
    post = policy.postprocess_trajectory(batch, others, episode)
    if hook:
        sampler.callbacks.on_postprocess_trajectory(
            worker=worker,
            episode=episode,
            agent_id=agent_id,
            policy_id=policy_id,
            policies=policy_map,
            postprocessed_batch=post,
            original_batches={**others, agent_id: (policy, original)},
        )
    return post


class SamplerBase:
    """The plumbing of a sampler over a worker's sub-envs.

    Subclasses implement `sample()` (postprocessed batches), `_reset_all(seed)`
    and their loop; they call `_episode_started` / `_episode_ended` around each
    episode.

    Args:
        worker: the `RolloutWorker` (callbacks, policy map, seeds, flags).
        env: the worker's `BaseEnv`.
        config: the trainer config.
    """

    def __init__(self, worker: Any, env: Any, config: dict) -> None:
        self.worker = worker
        self.env = env
        # The list itself: a restarted sub-env replaces its entry.
        self.envs = env.get_sub_environments()
        self.num_envs = len(self.envs)
        self.callbacks = worker.callbacks
        # Vector steps per fragment. RLlib 1.13's fragment is `rollout_fragment_length` x
        # `num_envs_per_worker` env steps; a vector env of the creator's own may hold
        # another number of sub-envs (`num_envs_per_worker` 1): it steps all of them
        # just often enough for that many (1.13 cut the last vector step between two
        # fragments).
        per_worker = int(config["rollout_fragment_length"]) * int(
            config.get("num_envs_per_worker") or 1
        )
        self.fragment_length = max(1, -(-per_worker // self.num_envs))
        self.complete_episodes = config["batch_mode"] == "complete_episodes"
        self._whole_episode_wait = WholeEpisodeWait(self.fragment_length * self.num_envs)
        self.end_rule = EpisodeEndRule.from_config(config)
        self.unsquash = bool(config.get("normalize_actions"))
        self.clip = bool(config.get("clip_actions"))
        # Observations must lie in their Box's bounds unless `disable_env_checking`
        # (finiteness is always checked).
        self.check_obs_bounds = not config.get("disable_env_checking")
        self.reward_clip = reward_clip_bounds(config.get("clip_rewards"), self.envs[0])
        # Hooks the callbacks class leaves as the base no-op are not called at all.
        self.call_start_hook = self.callbacks.overrides("on_episode_start")
        self.call_end_hook = self.callbacks.overrides("on_episode_end")
        self.call_step_hook = self.callbacks.overrides("on_episode_step")
        self.call_postprocess_hook = self.callbacks.overrides("on_postprocess_trajectory")
        self.timers = SamplerTimers()
        # `render_env`: the worker that shows the env renders its first sub-env each step.
        self.render_env = bool(getattr(worker, "render_env", False)) and _can_render(self.envs[0])
        self._episode_counter = 0
        self._finished: list[RolloutMetrics] = []
        # `restart_failed_sub_environments`: a sub-env that raises is rebuilt and
        # its episode dropped.
        self.restarts = SubEnvRestarts(worker, self) if restart_enabled(config) else None
        # `output_config.store_infos`: the sampled batches carry an `infos` column, the
        # info dict the env returned with each row's step. The samplers set up the
        # recording that keeps them once, here: without it their loops do no more work.
        self.store_infos = stores_infos(config)

    # RLlib's names for the rule's settings.
    @property
    def horizon(self) -> int | None:
        return self.end_rule.horizon

    @property
    def soft_horizon(self) -> bool:
        return self.end_rule.soft_horizon

    @property
    def no_done_at_end(self) -> bool:
        return self.end_rule.no_done_at_end

    def sample(self) -> Any:
        """One fragment (or complete episodes), postprocessed."""
        raise NotImplementedError

    def _reset_all(self, seed: int | None) -> None:
        raise NotImplementedError

    def reset(self) -> None:
        """Starts new episodes in every sub-env (unfinished ones are dropped)."""
        self._reset_all(None)

    def get_metrics(self) -> list[RolloutMetrics]:
        """The metrics of the episodes finished since the last call."""
        out, self._finished = self._finished, []
        return out

    # -- episodes -------------------------------------------------------------

    def _new_episode_id(self) -> int:
        """A new episode id, unique across the workers of a trainer."""
        self._episode_counter += 1
        return (self.worker.worker_index << 40) + self._episode_counter

    def _reset_env(self, i: int, seed: int | None = None) -> tuple[Any, dict]:
        """Resets sub-env `i`; with restarts on, a sub-env whose reset raises is rebuilt."""
        if self.restarts is None:
            env = self.envs[i]
            return check_reset_output(env, env.reset(seed=seed))
        return self.restarts.reset(i, seed)

    def _episode_started(self, episode: Episode, env_index: int, policies: Sequence[Any]) -> None:
        """Runs the start hooks of a new episode: each acting policy's exploration
        (e.g. Ornstein-Uhlenbeck noise restarts) and `on_episode_start`."""
        for policy in policies:
            exploration = getattr(policy, "exploration", None)
            if exploration is not None:
                exploration.on_episode_start(policy=policy, environment=self.env, episode=episode)
        if self.call_start_hook:
            self._episode_hook(self.callbacks.on_episode_start, episode, env_index)

    def _episode_ended(self, episode: Episode, env_index: int, faulty: bool = False) -> None:
        """`on_episode_end` (not for a faulty episode: its sub-env raised) and the
        episode's metrics."""
        if self.call_end_hook and not faulty:
            self._episode_hook(self.callbacks.on_episode_end, episode, env_index)
        self._finished.append(RolloutMetrics.from_episode(episode, self.timers.as_dict(), faulty))

    def _episode_step_hook(self, episode: Episode, env_index: int) -> None:
        self._episode_hook(self.callbacks.on_episode_step, episode, env_index)

    def _episode_hook(self, hook: Callable[..., Any], episode: Episode, env_index: int) -> None:
        """Calls an episode callback with RLlib 1.13's keyword arguments."""
        hook(
            worker=self.worker,
            base_env=self.env,
            policies=self.worker.policy_map,
            episode=episode,
            env_index=env_index,
        )

    def _render(self) -> None:
        """Renders the first sub-env (`render_env`), timed as RLlib's `env_render`."""
        t0 = time.perf_counter()
        self.envs[0].render()
        self.timers.render += time.perf_counter() - t0


class SubEnvRestarts:
    """`restart_failed_sub_environments`: steps and resets sub-envs so that one
    that raises is caught, closed and rebuilt, while the others go on.

    Shared by both samplers; the sampler drops the broken episode.

    Args:
        worker: the `RolloutWorker` (`recreate_sub_environment(i)` rebuilds one).
        sampler: the sampler, whose `envs` list holds the sub-envs.
    """

    def __init__(self, worker: Any, sampler: Any) -> None:
        self.worker = worker
        self.sampler = sampler

    def step_all(
        self, actions: Sequence[Any], stand_in: Callable[[int], Any]
    ) -> tuple[list, list[tuple[int, BaseException]]]:
        """Steps every sub-env; a failed one's result is `stand_in(i)`.

        Returns the results and the (index, exception) of each failed sub-env.
        """
        try_step = getattr(self.sampler.env, "try_step_all", None)
        if try_step is not None:  # remote sub-envs: stepped in parallel
            outcomes = list(try_step(actions))
        else:
            outcomes = []
            for env, action in zip(self.sampler.envs, actions):
                try:
                    outcomes.append(env.step(action))
                except Exception as e:  # noqa: BLE001 - the sub-env is restarted
                    outcomes.append(e)
        failures = [(i, o) for i, o in enumerate(outcomes) if isinstance(o, BaseException)]
        for i, _ in failures:
            outcomes[i] = stand_in(i)
        return outcomes, failures

    def reset(self, i: int, seed: int | None = None) -> tuple[Any, dict]:
        """`reset()` of sub-env `i`; if it raises, the sub-env is rebuilt (the
        restart is reported as a faulty episode without steps)."""
        env = self.sampler.envs[i]
        try:
            out = env.reset(seed=seed)
        except Exception as e:  # noqa: BLE001 - the sub-env is restarted
            self.sampler._finished.append(_empty_faulty_metrics())
            return self.restart(i, e)
        return check_reset_output(env, out)

    def restart(self, i: int, error: BaseException) -> tuple[Any, dict]:
        """Closes sub-env `i`, builds a new one in its place and resets it."""
        worker_index = self.worker.worker_index
        for attempt in range(1, MAX_SUB_ENV_RESTARTS_IN_A_ROW + 1):
            logger.warning(
                "Sub-env %d of worker %d raised %s: %s; restarting it "
                "(restart_failed_sub_environments); its episode is dropped.",
                i,
                worker_index,
                type(error).__name__,
                error,
            )
            env = self.worker.recreate_sub_environment(i)
            # Only the single-agent sampler keeps a replay log (for bit-identical resumes).
            replay_log = getattr(self.sampler, "replay_log", None)
            if replay_log is not None:
                replay_log.before_reset(i, None)
            try:
                out = env.reset()
            except Exception as e:  # noqa: BLE001 - retried, then reported
                if attempt == MAX_SUB_ENV_RESTARTS_IN_A_ROW:
                    raise EnvError(
                        f"Sub-env {i} of worker {worker_index} could not be restarted: "
                        f"{MAX_SUB_ENV_RESTARTS_IN_A_ROW} rebuilt copies raised in reset() in "
                        f"a row, the last {type(e).__name__}: {e}"
                    ) from e
                self.sampler._finished.append(_empty_faulty_metrics())
                error = e
                continue
            return check_reset_output(env, out)
        raise AssertionError("unreachable")


def stores_infos(config: dict) -> bool:
    """Whether `output_config.store_infos` is on: sampled batches carry an `infos` column
    (RLlib 1.13's key; its torch policies kept the column always)."""
    output_config = config.get("output_config") or {}
    return bool(output_config.get("store_infos", False))


def restart_enabled(config: dict) -> bool:
    """Whether `restart_failed_sub_environments` is on (RLlib 2.0's key)."""
    return bool(config.get("restart_failed_sub_environments"))


def _empty_faulty_metrics() -> RolloutMetrics:
    """A restart that cut no episode short (the sub-env raised before its first step)."""
    return RolloutMetrics(0, 0.0, {}, {}, {}, {}, {}, True)


def _can_render(env: Any) -> bool:
    from corral.env.remote_vector_env import can_render

    if can_render(env):
        return True
    logger.warning(
        "render_env=True, but the env cannot render (no render_mode and no render() of "
        "its own); create it with render_mode='human' or 'rgb_array'. Not rendering."
    )
    return False
