"""``corral evaluate --out DIR``: the evaluated episodes, written with the offline writer.

The evaluation env is wrapped in a recorder that sees every ``reset`` and ``step`` and
writes each finished (or ``--steps``-cut) episode as one batch with
`corral.offline.JsonWriter`: RLlib 1.x's JSON layout, readable by
`corral.offline.JsonReader` and by ``"input": DIR`` of an offline algorithm. A
single-agent episode is a ``SampleBatch``; a multi-agent one a ``MultiAgentBatch``
holding each policy's rows under its id (the policy the agent acted with).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np

from corral.env import MultiAgentEnv
from corral.offline import JsonWriter, OutputWriter
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch

# The actions are the policy's greedy ones: under the policy that chose them each had
# probability 1 (what importance-sampling estimators read as the behaviour policy's).
_GREEDY_COLUMNS = {SampleBatch.ACTION_PROB: 1.0, SampleBatch.ACTION_LOGP: 0.0}


def rollout_writer(out_dir: str) -> JsonWriter:
    """The writer of ``--out``: JSON files ``output-<date>_worker-0_<n>.json`` in ``out_dir``."""
    return JsonWriter(out_dir)


def record_episodes(
    env: Any, writer: OutputWriter, policy_mapping_fn: Callable[..., Any] | None = None
) -> Any:
    """``env`` wrapped so that each episode stepped in it is written to ``writer``.

    Args:
        env: a Gymnasium env or a `MultiAgentEnv`.
        writer: where each episode goes, as one batch.
        policy_mapping_fn: multi-agent envs: ``(agent_id, episode, worker) -> policy id``,
            the policy whose rows an agent's steps become.
    """
    if isinstance(env, MultiAgentEnv):
        if policy_mapping_fn is None:
            raise ValueError("recording a multi-agent env needs its policy_mapping_fn")
        return _MultiAgentRecorder(env, writer, policy_mapping_fn)
    return _Recorder(env, writer)


class _Rows:
    """One agent's steps of one episode, as columns."""

    def __init__(self, eps_id: int, agent_index: int) -> None:
        self.eps_id = eps_id
        self.agent_index = agent_index
        self.columns: dict[str, list] = {}

    def add(
        self, obs: Any, action: Any, reward: float, new_obs: Any, term: bool, trunc: bool
    ) -> None:
        row = {
            SampleBatch.OBS: obs,
            SampleBatch.ACTIONS: action,
            SampleBatch.REWARDS: float(reward),
            SampleBatch.NEXT_OBS: new_obs,
            SampleBatch.TERMINATEDS: bool(term),
            SampleBatch.TRUNCATEDS: bool(trunc),
            SampleBatch.DONES: bool(term or trunc),
        }
        for key, value in row.items():
            self.columns.setdefault(key, []).append(value)

    def __len__(self) -> int:
        return len(self.columns.get(SampleBatch.REWARDS, ()))

    def batch(self) -> SampleBatch:
        n = len(self)
        data: dict[str, Any] = {k: np.asarray(v) for k, v in self.columns.items()}
        # The writer's readers treat float columns as float32 (corral's batches are).
        for key in (SampleBatch.OBS, SampleBatch.NEXT_OBS, SampleBatch.REWARDS):
            if data[key].dtype == np.float64:
                data[key] = data[key].astype(np.float32)
        data[SampleBatch.EPS_ID] = np.full(n, self.eps_id, dtype=np.int64)
        data[SampleBatch.T] = np.arange(n, dtype=np.int64)
        data[SampleBatch.ENV_ID] = np.zeros(n, dtype=np.int64)
        data[SampleBatch.AGENT_INDEX] = np.full(n, self.agent_index, dtype=np.int64)
        for key, value in _GREEDY_COLUMNS.items():
            data[key] = np.full(n, value, dtype=np.float32)
        return SampleBatch(data)


def _new_eps_id() -> int:
    # RLlib's episode ids: random 63-bit integers.
    return random.randrange(2**63)


class _Recorder(gymnasium.Wrapper):
    """A single-agent env whose episodes are written as ``SampleBatch`` es."""

    def __init__(self, env: Any, writer: OutputWriter) -> None:
        super().__init__(env)
        self._writer = writer
        self._rows: _Rows | None = None
        self._obs: Any = None

    def reset(self, **kwargs: Any) -> Any:
        self._flush()  # an episode cut before it ended
        obs, info = self.env.reset(**kwargs)
        self._rows, self._obs = _Rows(_new_eps_id(), 0), obs
        return obs, info

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self._rows is not None:
            self._rows.add(self._obs, action, float(reward), obs, terminated, truncated)
        self._obs = obs
        if terminated or truncated:
            self._flush()
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        self._flush()
        self.env.close()

    def _flush(self) -> None:
        if self._rows is not None and len(self._rows):
            self._writer.write(self._rows.batch())
        self._rows = None


class _MultiAgentRecorder(MultiAgentEnv):
    """A `MultiAgentEnv` whose episodes are written as ``MultiAgentBatch`` es."""

    def __init__(
        self, env: MultiAgentEnv, writer: OutputWriter, mapping: Callable[..., Any]
    ) -> None:
        self.env = env
        self._writer = writer
        self._mapping = mapping
        self._rows: dict[Any, _Rows] = {}
        self._obs: dict = {}
        self._eps_id = 0
        self._env_steps = 0
        # Spaces, agent lists and render mode are the wrapped env's.
        for name in ("observation_space", "action_space", "observation_spaces"):
            setattr(self, name, getattr(env, name, None))
        self.action_spaces = getattr(env, "action_spaces", None)
        self.possible_agents = list(getattr(env, "possible_agents", []))
        self.render_mode = getattr(env, "render_mode", None)

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes this wrapper does not set itself.
        env = self.__dict__.get("env")
        if env is None:
            raise AttributeError(name)
        return getattr(env, name)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        self._flush()
        obs, info = self.env.reset(seed=seed, options=options)
        self._rows, self._obs, self._env_steps = {}, dict(obs), 0
        self._eps_id = _new_eps_id()
        return obs, info

    def step(self, action_dict: dict) -> Any:
        # Typed as any: gym.Env's signature is the single-agent one.
        stepped: Any = self.env.step(action_dict)
        obs, rewards, terminateds, truncateds, infos = stepped
        self._env_steps += 1
        for agent, action in action_dict.items():
            if agent not in self._rows:
                self._rows[agent] = _Rows(self._eps_id, len(self._rows))
            self._rows[agent].add(
                self._obs.get(agent),
                action,
                rewards.get(agent, 0.0),
                # An agent that got no new observation keeps its last one.
                obs.get(agent, self._obs.get(agent)),
                bool(terminateds.get(agent) or terminateds.get("__all__")),
                bool(truncateds.get(agent) or truncateds.get("__all__")),
            )
        self._obs.update(obs)
        if terminateds.get("__all__") or truncateds.get("__all__"):
            self._flush()
        return obs, rewards, terminateds, truncateds, infos

    def render(self, mode: str | None = None) -> Any:
        return self.env.render() if mode is None else self.env.render(mode)

    def close(self) -> None:
        self._flush()
        self.env.close()

    def _flush(self) -> None:
        if self._env_steps:
            by_policy: dict[Any, list[SampleBatch]] = {}
            for agent, rows in self._rows.items():
                policy_id = self._mapping(agent, None, None)
                by_policy.setdefault(policy_id, []).append(rows.batch())
            policy_batches = {pid: SampleBatch.concat_samples(b) for pid, b in by_policy.items()}
            self._writer.write(MultiAgentBatch(policy_batches, self._env_steps))
        self._rows, self._env_steps = {}, 0
