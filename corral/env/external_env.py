"""`ExternalEnv`: an environment that runs on its own and asks the policy for actions
(RLlib 1.13's).

Where the simulator drives (a game server, a robot loop, a service answering users),
subclass `ExternalEnv` and write `run()`: it starts episodes, asks for actions with
`get_action(episode_id, obs)` (which blocks until the policy answers), reports rewards
with `log_returns` and ends episodes with `end_episode`. Actions chosen elsewhere are
recorded with `log_action` (off-policy data). Several episodes may run at once, from one
thread or many (up to `max_concurrent`).

The rollout worker starts `run()` in a thread of its own and samples from it with
`ExternalEnvSampler` (`corral.evaluation.external_env_sampler`): each `sample()` waits
for observations, answers every waiting episode with one batched forward pass, and
returns `rollout_fragment_length` recorded steps.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from corral.env.base_env import BaseEnv, sub_environments
from corral.env.rewards import as_reward
from corral.utils.error import EnvError

# Seconds `get_action` waits for the policy before it raises (RLlib's).
ACTION_TIMEOUT_S = 300.0
# Seconds `log_action` waits for the sampler to take the logged step.
LOG_ACTION_TIMEOUT_S = 60.0


class ExternalEnvStopped(SystemExit):
    """Raised in the env's thread by `get_action` / `log_action` once the rollout worker
    has stopped. A `SystemExit`: it ends the thread quietly (`finally` blocks run; an
    `except Exception` does not catch it)."""


# The answer that wakes the episodes waiting for an action when the worker stops.
_STOP: Any = object()


@dataclass
class ExternalStep:
    """What an episode reported to the sampler: an observation and the reward, info and
    end flag since its last action; `action` is set for a logged (off-policy) action."""

    episode_id: str
    obs: Any
    reward: float
    info: dict
    done: bool = False
    action: Any = None
    first: bool = False
    training_enabled: bool = True
    # A multi-agent episode's per-agent done flags since its last action.
    dones: dict | None = None


@dataclass
class _Episode:
    episode_id: str
    training_enabled: bool
    reward: Any = 0.0  # a float, or a dict by agent (`ExternalMultiAgentEnv`)
    info: dict = field(default_factory=dict)
    dones: dict | None = None
    started: bool = False
    actions: queue.Queue = field(default_factory=lambda: queue.Queue(maxsize=1))


class ExternalEnv(threading.Thread):
    """An env that drives itself and asks the policy for actions (see the module doc).

    Args:
        action_space: the action space.
        observation_space: the observation space.
        max_concurrent: how many episodes may run at once.
    """

    # Whether observations, actions and rewards are dicts by agent id.
    multi_agent = False

    def __init__(
        self, action_space: gym.Space, observation_space: gym.Space, max_concurrent: int = 100
    ) -> None:
        super().__init__(daemon=True)
        self.action_space = action_space
        self.observation_space = observation_space
        self._max_concurrent_episodes = int(max_concurrent)
        self._episodes: dict[str, _Episode] = {}
        self._finished: set[str] = set()
        self._lock = threading.Lock()
        # Steps for the sampler, in the order the episodes reported them.
        self._steps: queue.Queue[ExternalStep] = queue.Queue()
        # An exception `run()` raised, for the sampler to re-raise.
        self.error: BaseException | None = None
        self._stopped = False

    def run(self) -> None:
        """Your simulation loop: start episodes, get actions, log returns, end episodes."""
        raise NotImplementedError("Subclass ExternalEnv and implement run().")

    # -- the API `run()` calls ---------------------------------------------

    def start_episode(self, episode_id: str | None = None, training_enabled: bool = True) -> str:
        """Starts an episode; returns its id (a new unique one unless given).

        Args:
            episode_id: the id to use.
            training_enabled: whether the episode's steps are trained on (else only acted
                on and counted in the metrics).

        Raises:
            ValueError: the id is running or finished, or `max_concurrent` episodes run.
        """
        episode_id = episode_id or uuid.uuid4().hex
        with self._lock:
            if episode_id in self._finished:
                raise ValueError(f"Episode {episode_id} has already completed.")
            if episode_id in self._episodes:
                raise ValueError(f"Episode {episode_id} is already started.")
            if len(self._episodes) >= self._max_concurrent_episodes:
                raise ValueError(
                    f"Already {len(self._episodes)} episodes running (max_concurrent="
                    f"{self._max_concurrent_episodes}); end one first."
                )
            self._episodes[episode_id] = _Episode(episode_id, bool(training_enabled))
        return episode_id

    def get_action(self, episode_id: str, observation: Any) -> Any:
        """The policy's action for `observation` (blocks until the sampler answers)."""
        episode = self._send(episode_id, observation)
        try:
            action = episode.actions.get(timeout=ACTION_TIMEOUT_S)
        except queue.Empty:
            raise EnvError(
                f"Episode {episode_id}: no action within {ACTION_TIMEOUT_S:.0f} s (is the "
                "trainer sampling?)."
            ) from None
        if action is _STOP:
            raise ExternalEnvStopped(f"The rollout worker stopped (episode {episode_id}).")
        return action

    def log_action(self, episode_id: str, observation: Any, action: Any) -> None:
        """Records `action`, taken at `observation` by something else (off-policy data)."""
        episode = self._send(episode_id, observation, action=action)
        try:
            answer = episode.actions.get(timeout=LOG_ACTION_TIMEOUT_S)
        except queue.Empty:
            raise EnvError(
                f"Episode {episode_id}: the logged action was not taken within "
                f"{LOG_ACTION_TIMEOUT_S:.0f} s (is the trainer sampling?)."
            ) from None
        if answer is _STOP:
            raise ExternalEnvStopped(f"The rollout worker stopped (episode {episode_id}).")

    def log_returns(self, episode_id: str, reward: float, info: dict | None = None) -> None:
        """Adds `reward` to what the episode's last action earned (`info`: its info)."""
        episode = self._get(episode_id)
        episode.reward += as_reward(reward, f"log_returns({episode_id!r}, ...)")
        if info:
            episode.info = dict(info)

    def end_episode(self, episode_id: str, observation: Any) -> None:
        """Ends the episode at its last `observation` (a terminal step)."""
        episode = self._get(episode_id)
        with self._lock:
            self._finished.add(episode_id)
            del self._episodes[episode_id]
        self._put(episode, observation, done=True)

    def to_base_env(self, *args: Any, **kwargs: Any) -> BaseEnv:
        """This env as the `BaseEnv` a rollout worker samples from."""
        return ExternalEnvWrapper(self)

    # -- plumbing ------------------------------------------------------------

    def _get(self, episode_id: str) -> _Episode:
        with self._lock:
            episode = self._episodes.get(episode_id)
        if episode is None:
            state = "has ended" if episode_id in self._finished else "was never started"
            raise ValueError(f"Episode {episode_id} {state} (start_episode() first).")
        return episode

    def _send(self, episode_id: str, observation: Any, action: Any = None) -> _Episode:
        if self._stopped:
            raise ExternalEnvStopped(f"The rollout worker stopped (episode {episode_id}).")
        episode = self._get(episode_id)
        self._put(episode, observation, action=action)
        return episode

    def _put(self, episode: _Episode, obs: Any, done: bool = False, action: Any = None) -> None:
        step = ExternalStep(
            episode.episode_id,
            obs,
            episode.reward,
            episode.info,
            done=done,
            action=action,
            first=not episode.started,
            training_enabled=episode.training_enabled,
            dones=episode.dones,
        )
        episode.started = True
        episode.reward, episode.info, episode.dones = 0.0, {}, None
        self._steps.put(step)

    def stop_episodes(self) -> None:
        """The rollout worker stops: every episode waiting for an action, and every later
        `get_action` / `log_action`, raises `ExternalEnvStopped` in the env's thread."""
        self._stopped = True
        with self._lock:
            waiting = list(self._episodes.values())
        for episode in waiting:
            with contextlib.suppress(queue.Full):  # (already answered)
                episode.actions.put_nowait(_STOP)

    def _answer(self, episode_id: str, action: Any) -> None:
        """The sampler's answer to a waiting `get_action` / `log_action`."""
        with self._lock:
            episode = self._episodes.get(episode_id)
        if episode is not None:
            episode.actions.put(action)

    def start(self) -> None:
        """Runs `run()` in this thread (the rollout worker calls it once). When `run()`
        returns or raises, the sampler is told: its next `sample()` raises, naming the
        exception."""
        user_run = self.run

        def guarded() -> None:
            try:
                user_run()
            except ExternalEnvStopped:  # the worker stopped: a normal end
                pass
            except BaseException as error:  # noqa: BLE001 - re-raised by the sampler
                self.error = error
            finally:
                self._steps.put(_RUN_ENDED)

        self.run = guarded  # type: ignore[method-assign]
        super().start()

    def next_step(self, timeout: float) -> ExternalStep | None:
        """The next step an episode reported, waiting up to `timeout` s (None: none).

        Raises:
            EnvError: `run()` has ended (returned or raised).
        """
        try:
            step = self._steps.get(timeout=timeout)
        except queue.Empty:
            return None
        if step is _RUN_ENDED:
            self._steps.put(_RUN_ENDED)  # every later call raises too
            how = f"raised {type(self.error).__name__}: {self.error}" if self.error else "returned"
            raise EnvError(
                f"ExternalEnv {type(self).__name__}.run() {how}; no more steps."
            ) from self.error
        return step


# Put on the step queue when `run()` ends.
_RUN_ENDED: Any = ExternalStep("", None, 0.0, {})


class ExternalEnvWrapper(BaseEnv):
    """An `ExternalEnv` as the rollout worker's `BaseEnv`; starts its thread."""

    sub_envs_replayable = False

    def __init__(self, external_env: ExternalEnv) -> None:
        self.external_env = external_env
        self.num_envs = 1
        self.observation_space = external_env.observation_space
        self.action_space = external_env.action_space
        if external_env.ident is None:  # not started yet
            external_env.start()

    def get_sub_environments(self, as_dict: bool = False) -> Any:
        return sub_environments([self.external_env], as_dict)

    def try_render(self, env_id: int | None = None) -> Any:
        return None

    def stop(self) -> None:
        """Ends the env's thread: its waiting (and later) requests for actions raise
        `ExternalEnvStopped`."""
        self.external_env.stop_episodes()

    def worker_env(self) -> ExternalEnv:
        return self.external_env


def external_worker_env(
    config: Mapping[str, Any], external_env: ExternalEnv, num_envs: int
) -> ExternalEnvWrapper:
    """A rollout worker's env when its env creator returned an `ExternalEnv`.

    Raises:
        ValueError: `num_envs_per_worker > 1` (RLlib's rule: one external env per worker),
            or settings about sub-envs (`remote_worker_envs`, `restart_failed_sub_environments`).
    """
    name = type(external_env).__name__
    if num_envs > 1:
        raise ValueError(
            f"ExternalEnv {name}: num_envs_per_worker={num_envs}, but an external env runs "
            "its own episodes (as many at once as it likes): use num_envs_per_worker=1."
        )
    for key in ("remote_worker_envs", "restart_failed_sub_environments", "record_env"):
        if config.get(key):
            raise ValueError(
                f"ExternalEnv {name}: {key}={config[key]!r} does not apply to an env that runs "
                "itself; leave it unset."
            )
    # Old `gym.spaces` (RLlib 1.x code) become Gymnasium's.
    from corral.env.gym_compat import convert_space

    external_env.observation_space = convert_space(external_env.observation_space)
    external_env.action_space = convert_space(external_env.action_space)
    return ExternalEnvWrapper(external_env)
