"""Acting outside of sampling: what `Trainer.compute_single_action` / `compute_actions` do.

An observation given to a trainer goes through the local worker's preprocessor
and filter (the filter with `update=False`: acting must not shift the running
statistics the workers share), then through the policy's
`compute_actions_from_input_dict`, and the action comes back in the env's action
space (`unsquash_action` / `clip_action`, or the policy's config when None), so
that it is the action the policy would take while sampling.

`compute_single_action`, `compute_actions` and `compute_action` are `Trainer`'s
methods of those names (bound there; `trainer` is the trainer acting), with
RLlib 1.13's signatures.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.evaluation.episode import Episode
from corral.policy.policy import Policy
from corral.policy.sample_batch import DEFAULT_POLICY_ID, SampleBatch
from corral.utils.deprecation import deprecation_warning_once
from corral.utils.spaces import as_flat_action_rows

if TYPE_CHECKING:
    from corral.agents.trainer import Trainer

EITHER_OBS_OR_INPUT_DICT = (
    "Provide either `input_dict` OR [`observation`, ...] as args to Trainer.compute_single_action!"
)


def compute_single_action(
    trainer: Trainer,
    observation: Any = None,
    state: list | None = None,
    *,
    prev_action: Any = None,
    prev_reward: float | None = None,
    info: dict | None = None,
    input_dict: dict | None = None,
    policy_id: str = DEFAULT_POLICY_ID,
    full_fetch: bool = False,
    explore: bool | None = None,
    timestep: int | None = None,
    episode: Any = None,
    unsquash_action: bool | None = None,
    clip_action: bool | None = None,
    unsquash_actions: bool | None = None,
    clip_actions: bool | None = None,
    **kwargs: Any,
) -> Any:
    """The action of policy `policy_id` for one observation.

    The observation is preprocessed and filtered (without updating the
    filter) exactly as the sampler does, so the action is the one the
    policy would take in the env. Returns the action, or
    `(action, state_out, extra_fetches)` when `full_fetch` is True or the
    policy is recurrent.

    Raises:
        ValueError: neither or both of `observation` and `input_dict`.
        KeyError: `policy_id` is not a policy of the local worker.
    """
    if unsquash_actions is not None:
        deprecation_warning_once(
            "Trainer.compute_single_action(`unsquash_actions`=...)",
            "Trainer.compute_single_action(`unsquash_action`=...)",
        )
        unsquash_action = unsquash_actions
    if clip_actions is not None:
        deprecation_warning_once(
            "Trainer.compute_single_action(`clip_actions`=...)",
            "Trainer.compute_single_action(`clip_action`=...)",
        )
        clip_action = clip_actions
    if input_dict is not None:
        if any(v is not None for v in (observation, state, prev_action, prev_reward)):
            raise ValueError(EITHER_OBS_OR_INPUT_DICT)
        batch = {k: _batch_of_one(v) for k, v in input_dict.items()}
        observation = input_dict[SampleBatch.OBS]
    elif observation is None:
        raise ValueError(EITHER_OBS_OR_INPUT_DICT)
    else:
        batch = _single_input_batch(state, prev_action, prev_reward, info)
    policy = policy_or_key_error(trainer, policy_id)
    batch[SampleBatch.OBS] = preprocess_and_filter(trainer, policy_id, [observation])
    actions, state_out, extra = policy.compute_actions_from_input_dict(
        batch,
        explore=explore,
        timestep=timestep,
        episodes=None if episode is None else [episode],
        **kwargs,
    )
    actions = as_flat_action_rows(policy.action_space, actions)
    action = to_env_action(policy, _first(actions), unsquash_action, clip_action)
    state_out = [s[0] for s in state_out]
    if state or state_out or full_fetch:
        return action, state_out, {k: _first(v) for k, v in extra.items()}
    return action


def compute_actions(
    trainer: Trainer,
    observations: dict,
    state: dict | None = None,
    *,
    prev_action: Any = None,
    prev_reward: Any = None,
    info: dict | None = None,
    policy_id: str | None = DEFAULT_POLICY_ID,
    full_fetch: bool = False,
    explore: bool | None = None,
    timestep: int | None = None,
    episodes: list | None = None,
    unsquash_actions: bool | None = None,
    clip_actions: bool | None = None,
    normalize_actions: bool | None = None,
    **kwargs: Any,
) -> Any:
    """Actions of policy `policy_id` for a dict of observations (agent id -> obs).

    With `policy_id=None`, each agent acts with the policy that the
    `policy_mapping_fn` maps it to (one batch per policy; extra fetches
    are then keyed by policy id), as in a multi-agent episode.

    All observations go through the policy in one batch. `state` maps
    agent ids to their recurrent state (agents missing from it start from
    the policy's initial state). Returns `{agent_id: action}`, or
    `(actions, {agent_id: state_out}, extra_fetches)` (extra fetches
    batched in the order of `observations`) when `full_fetch` is True or
    a `state` was given.
    """
    if not isinstance(observations, Mapping):
        raise TypeError(
            "Trainer.compute_actions takes a dict of observations keyed by agent id "
            f"({{agent_id: obs}}), got a {type(observations).__name__}; for one "
            "observation, use compute_single_action(obs)."
        )
    if normalize_actions is not None:
        deprecation_warning_once(
            "Trainer.compute_actions(`normalize_actions`=...)",
            "Trainer.compute_actions(`unsquash_actions`=...)",
        )
        unsquash_actions = normalize_actions
    if policy_id is None:
        return _compute_actions_per_policy(
            trainer,
            observations,
            state,
            prev_action=prev_action,
            prev_reward=prev_reward,
            info=info,
            full_fetch=full_fetch,
            explore=explore,
            timestep=timestep,
            episodes=episodes,
            unsquash_actions=unsquash_actions,
            clip_actions=clip_actions,
            **kwargs,
        )
    policy = policy_or_key_error(trainer, policy_id)
    agents = list(observations)
    batch = {SampleBatch.OBS: preprocess_and_filter(trainer, policy_id, observations.values())}
    if state is not None:
        per_agent = [state.get(a, policy.get_initial_state()) for a in agents]
        for i, column in enumerate(zip(*per_agent)):
            batch[f"state_in_{i}"] = np.stack(column)
    for key, value in (
        (SampleBatch.PREV_ACTIONS, prev_action),
        (SampleBatch.PREV_REWARDS, prev_reward),
        (SampleBatch.INFOS, info),
    ):
        if value is not None:
            batch[key] = _per_agent_column(value, agents)
    actions, states_out, extra = policy.compute_actions_from_input_dict(
        batch, explore=explore, timestep=timestep, episodes=episodes, **kwargs
    )
    actions = as_flat_action_rows(policy.action_space, actions)
    by_agent = {
        a: to_env_action(policy, actions[i], unsquash_actions, clip_actions)
        for i, a in enumerate(agents)
    }
    if state is not None or full_fetch:
        states = {a: [s[i] for s in states_out] for i, a in enumerate(agents)}
        return by_agent, states, extra
    return by_agent


def compute_action(trainer: Trainer, *args: Any, **kwargs: Any) -> Any:
    """Deprecated alias of `compute_single_action`."""
    deprecation_warning_once("Trainer.compute_action", "Trainer.compute_single_action")
    return trainer.compute_single_action(*args, **kwargs)


def _compute_actions_per_policy(
    trainer: Trainer,
    observations: dict,
    state: dict | None,
    *,
    prev_action: Any,
    prev_reward: Any,
    info: Any,
    full_fetch: bool,
    episodes: list | None,
    **kwargs: Any,
) -> Any:
    """`compute_actions(policy_id=None)`: agents grouped by their mapped policy,
    one batched forward pass per policy; results keyed in `observations` order.

    The mapping sees `episodes[0]` when given (so it stays fixed over an
    episode, as while sampling), else a fresh stand-in episode. Each group goes
    through `trainer.compute_actions`, so a subclass's override sees it.
    """
    local = trainer.workers.local_worker()
    episode = (
        episodes[0]
        if episodes
        else Episode(-1, 0, local.policy_map, local.policy_mapping_fn, worker=local)
    )
    groups: dict[str, list] = defaultdict(list)
    policy_of = {agent: episode.policy_for(agent) for agent in observations}
    for agent, pid in policy_of.items():
        groups[pid].append(agent)
    actions, states, extras = {}, {}, {}
    for pid, agents in groups.items():
        actions[pid], states[pid], extras[pid] = trainer.compute_actions(
            {a: observations[a] for a in agents},
            None if state is None else {a: state[a] for a in agents if a in state},
            prev_action=_agents_subset(prev_action, agents),
            prev_reward=_agents_subset(prev_reward, agents),
            info=_agents_subset(info, agents),
            policy_id=pid,
            full_fetch=True,
            episodes=episodes,
            **kwargs,
        )
    # In the order of `observations`, as with a single policy.
    by_agent = {a: actions[pid][a] for a, pid in policy_of.items()}
    if state is not None or full_fetch:
        states_by_agent = {a: states[pid][a] for a, pid in policy_of.items()}
        return by_agent, states_by_agent, extras
    return by_agent


def policy_or_key_error(trainer: Trainer, policy_id: str) -> Policy:
    """The local worker's policy `policy_id`; a `KeyError` listing the policies if none."""
    policy = trainer.get_policy(policy_id)
    if policy is None:
        raise KeyError(
            f"PolicyID '{policy_id}' not found in PolicyMap of the Trainer's local "
            f"worker; policies: {sorted(trainer.workers.local_worker().policy_map)}."
        )
    return policy


def preprocess_and_filter(trainer: Trainer, policy_id: str, observations: Any) -> np.ndarray:
    """A batch of observations as the policy sees them while sampling.

    The filter is applied with `update=False`: acting outside of sampling
    must not shift the running statistics the workers share.
    """
    worker = trainer.workers.local_worker()
    preprocessor = worker.preprocessors.get(policy_id)
    obs_filter = worker.filters[policy_id]
    rows = []
    for obs in observations:
        if preprocessor is not None:
            obs = _transform_checked(preprocessor, obs, policy_id)
        rows.append(obs_filter(obs, update=False))
    return np.stack(rows)


def to_env_action(policy: Policy, action: Any, unsquash: bool | None, clip: bool | None) -> Any:
    """Maps a policy-space action into the env's action space.

    `None` means the policy's config decides (`normalize_actions`,
    `clip_actions`), as it does while sampling. Policies without
    `to_env_actions` act in the env's space already.
    """
    to_env = getattr(policy, "to_env_actions", None)
    if to_env is None:
        return action
    if unsquash is None:
        unsquash = policy.config.get("normalize_actions", False)
    if clip is None:
        clip = policy.config.get("clip_actions", False)
    return to_env(action, bool(unsquash), bool(clip))


def _transform_checked(preprocessor: Any, obs: Any, policy_id: str) -> np.ndarray:
    """`preprocessor.transform(obs)`, with an error saying which observation shape the
    policy expects when `obs` does not fit (instead of a matrix-shape error from
    inside the model)."""
    space = getattr(preprocessor, "original_space", None)
    expected = tuple(getattr(preprocessor, "shape", ()) or ())
    try:
        out = preprocessor.transform(obs)
    except (ValueError, TypeError, IndexError) as err:
        raise ValueError(
            f"The observation {_short(obs)} does not fit policy {policy_id!r}'s observation "
            f"space {space} (preprocessed shape {expected}): {err}{_reset_pair_hint(obs, space)}"
        ) from None
    if np.shape(out) != expected:
        raise ValueError(
            f"Policy {policy_id!r} expects observations of shape "
            f"{tuple(getattr(space, 'shape', None) or expected)} (observation space {space}), "
            f"got one of shape {np.shape(obs)}: {_short(obs)}.{_reset_pair_hint(obs, space)}"
        )
    return out


def _reset_pair_hint(obs: Any, space: Any) -> str:
    """A hint when `obs` looks like the `(obs, info)` pair of a Gymnasium `reset()`: RLlib
    1.x code that steps a worker's env itself got the observation alone from gym's."""
    import gymnasium as gym

    if (
        isinstance(obs, tuple)
        and len(obs) == 2
        and isinstance(obs[1], dict)
        and not isinstance(space, gym.spaces.Tuple)
    ):
        return (
            " It looks like the (obs, info) pair that a Gymnasium env's reset() returns "
            "(the envs a worker holds follow Gymnasium's API, also for an env written for "
            "gym's): pass its first item."
        )
    return ""


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _batch_of_one(value: Any) -> Any:
    """`value` as a batch of size one (infos stay a list)."""
    if isinstance(value, dict):
        return [value]
    return np.expand_dims(np.asarray(value), 0)


def _single_input_batch(
    state: list | None, prev_action: Any, prev_reward: Any, info: dict | None
) -> dict[str, Any]:
    """The non-observation columns of a one-row input dict."""
    batch: dict[str, Any] = {}
    for i, s in enumerate(state or []):
        batch[f"state_in_{i}"] = _batch_of_one(s)
    if prev_action is not None:
        batch[SampleBatch.PREV_ACTIONS] = _batch_of_one(prev_action)
    if prev_reward is not None:
        batch[SampleBatch.PREV_REWARDS] = _batch_of_one(prev_reward)
    if info is not None:
        batch[SampleBatch.INFOS] = [info]
    return batch


def _per_agent_column(value: Any, agents: list) -> Any:
    """A per-agent dict as a column in `agents` order; anything else as given."""
    if isinstance(value, dict) and set(agents) <= set(value):
        column = [value[a] for a in agents]
        return column if isinstance(column[0], dict) else np.stack(column)
    return value


def _first(value: Any) -> Any:
    """Row 0 of a batched value (tuples, lists and dicts of batches alike)."""
    if isinstance(value, tuple | list):
        return type(value)(_first(v) for v in value)
    if isinstance(value, dict):
        return {k: _first(v) for k, v in value.items()}
    return value[0]


def _agents_subset(value: Any, agents: list) -> Any:
    """The entries of a per-agent dict that belong to `agents` (None stays None)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(
            "With policy_id=None, prev_action/prev_reward/info must be dicts keyed by agent id."
        )
    return {a: value[a] for a in agents if a in value} or None
