"""The episodes of ``corral evaluate``: greedy actions of a restored trainer, in a fresh env
that renders or records video when asked.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from typing import Any

from corral.cli.common import UsageError


def evaluate_episodes(
    trainer: Any,
    env_spec: Any,
    env_config: Mapping,
    args: argparse.Namespace,
    wrap_env: Callable[[Any], Any] | None = None,
) -> list[float]:
    """Runs ``args.episodes`` episodes (fewer if ``args.steps`` runs out), printing each
    one's reward and length; returns the rewards. ``wrap_env`` (e.g. ``--out``'s
    recorder) wraps the env the episodes run in."""
    from gymnasium.error import DependencyNotInstalled

    env = make_evaluation_env(trainer, env_spec, env_config, args.render, args.video_dir)
    if wrap_env is not None:
        env = wrap_env(env)
    budget = getattr(args, "steps", None)
    try:
        rewards = []
        for episode in range(args.episodes):
            seed = args.seed if episode == 0 else None
            reward, length, finished = run_episode(trainer, env, seed, budget)
            cut = "" if finished else " (cut by --steps)"
            print(f"Episode {episode + 1}: reward {reward:.2f}, length {length}{cut}", flush=True)
            rewards.append(reward)
            if budget is not None:
                budget -= length
                if budget <= 0:
                    break
        return rewards
    except DependencyNotInstalled as e:  # rendering libraries load on the first render
        raise UsageError(f"cannot render {env_spec!r}: {e}") from None
    finally:
        env.close()


def run_episode(
    trainer: Any,
    env: Any,
    seed: int | None = None,
    max_steps: int | None = None,
    *,
    explore: bool | None = False,
    on_step: Callable[..., Any] | None = None,
) -> tuple[float, int, bool]:
    """One episode with the trainer's actions (greedy by default), at most ``max_steps`` long.

    Multi-agent envs act through the trainer's ``policy_mapping_fn`` (each agent
    mapped once per episode); the episode's reward is the sum over its agents, as
    in RLlib's results. Recurrent policies get their state, previous action and
    reward back each step, as while sampling.

    Args:
        trainer: the trainer whose policies act.
        env: a Gymnasium env or a `MultiAgentEnv`.
        seed: seed of the env's reset.
        max_steps: cut the episode after this many steps.
        explore: passed to ``compute_single_action`` (``None``: the config's).
        on_step: called after each step with ``(obs, action, next_obs, reward, done,
            info)``; multi-agent: dicts by agent, ``done`` the episode's (``__all__``).

    Returns:
        (total reward, steps, whether the episode ended by itself).
    """
    from corral.env import MultiAgentEnv

    multi_agent = isinstance(env, MultiAgentEnv)
    actor = _EpisodeActor(trainer, explore, multi_agent)
    obs, _ = env.reset(seed=seed)
    total, steps, done = 0.0, 0, False
    finished: set = set()  # agents whose own episode ended: they get no more actions
    while not done and (max_steps is None or steps < max_steps):
        if multi_agent:
            action: Any = {
                agent: actor.act(agent, agent_obs)
                for agent, agent_obs in obs.items()
                if agent not in finished
            }
            next_obs, rewards, terminateds, truncateds, info = env.step(action)
            actor.rewarded(rewards)
            reward: Any = rewards
            total += float(sum(rewards.values()))
            done = bool(terminateds.get("__all__") or truncateds.get("__all__"))
            finished |= {
                a for a in {*terminateds, *truncateds} if _ended(a, terminateds, truncateds)
            }
        else:
            action = actor.act(_SINGLE_AGENT, obs)
            next_obs, reward, terminated, truncated, info = env.step(action)
            actor.rewarded({_SINGLE_AGENT: reward})
            total += float(reward)
            done = terminated or truncated
        steps += 1
        if on_step is not None:
            on_step(obs, action, next_obs, reward, done, info)
        obs = next_obs
    return total, steps, done


# The agent id of a single-agent env's one agent.
_SINGLE_AGENT = "agent0"


class _EpisodeActor:
    """The trainer's actions within one episode: each agent's policy (mapped on its first
    step) and, for recurrent policies, its state, previous action and previous reward."""

    def __init__(self, trainer: Any, explore: bool | None, multi_agent: bool) -> None:
        self.trainer = trainer
        self.explore = explore
        self.mapping = trainer.config["multiagent"]["policy_mapping_fn"] if multi_agent else None
        self.policy_ids: dict[Any, str] = {}
        self.states: dict[Any, list] = {}  # recurrent policies' agents only
        self.prev_actions: dict[Any, Any] = {}
        self.prev_rewards: dict[Any, float] = {}

    def act(self, agent: Any, obs: Any) -> Any:
        """The action of ``agent`` (its policy's) for ``obs``."""
        from corral.policy.sample_batch import DEFAULT_POLICY_ID

        if agent not in self.policy_ids:
            policy_id = (
                DEFAULT_POLICY_ID if self.mapping is None else self.mapping(agent, None, None)
            )
            self.policy_ids[agent] = policy_id
            self._start(agent, policy_id)
        policy_id = self.policy_ids[agent]
        if agent not in self.states:
            return self.trainer.compute_single_action(
                obs, policy_id=policy_id, explore=self.explore
            )
        action, self.states[agent], _ = self.trainer.compute_single_action(
            obs,
            state=self.states[agent],
            prev_action=self.prev_actions[agent],
            prev_reward=self.prev_rewards[agent],
            policy_id=policy_id,
            explore=self.explore,
        )
        self.prev_actions[agent] = _flat(action)
        return action

    def rewarded(self, rewards: Mapping) -> None:
        """Notes each recurrent agent's reward (its next step's previous reward)."""
        for agent, reward in rewards.items():
            if agent in self.states and reward is not None:
                self.prev_rewards[agent] = float(reward)

    def _start(self, agent: Any, policy_id: str) -> None:
        policy = self.trainer.get_policy(policy_id)
        state = policy.get_initial_state() if policy is not None else []
        if len(state):
            import numpy as np

            self.states[agent] = list(state)
            self.prev_actions[agent] = np.zeros_like(_flat(policy.action_space.sample()))
            self.prev_rewards[agent] = 0.0


def _flat(action: Any) -> Any:
    from corral.utils.spaces.space_utils import flatten_to_single_ndarray

    return flatten_to_single_ndarray(action)


def _ended(agent: Any, terminateds: Mapping, truncateds: Mapping) -> bool:
    return agent != "__all__" and bool(terminateds.get(agent) or truncateds.get(agent))


def make_evaluation_env(
    trainer: Any, env_spec: Any, env_config: Mapping, render: bool, video_dir: str | None
) -> Any:
    """A fresh env to roll out in, set up to render or record when asked.

    Gymnasium ids are made with ``gymnasium.make`` so ``render_mode`` can be
    chosen; other envs (registered names, classes) come from the trainer's
    creator and render as they were built to. An env written for the old gym API
    is converted as the rollout workers convert it (`ensure_gymnasium_env`).
    """
    import gymnasium

    from corral.env import EnvContext, MultiAgentEnv
    from corral.env.gym_compat import ensure_gymnasium_env

    render_mode = "rgb_array" if video_dir else "human" if render else None
    try:
        if _is_gymnasium_id(env_spec):
            env = gymnasium.make(env_spec, render_mode=render_mode, **dict(env_config))
        else:
            env = trainer.env_creator(EnvContext(dict(env_config)))
            env = ensure_gymnasium_env(env, render_mode=render_mode)
    except gymnasium.error.Error as e:
        raise UsageError(f"cannot make env {env_spec!r}: {e}") from None
    if isinstance(env, MultiAgentEnv) and video_dir:
        env.close()
        raise UsageError("--video-dir records single-agent envs only")
    if render_mode and getattr(env, "render_mode", None) != render_mode:
        print(f"Note: env {env_spec!r} does not render in mode {render_mode!r}.", file=sys.stderr)
        if video_dir:
            env.close()
            raise UsageError(f"--video-dir needs an env with render_mode 'rgb_array': {env_spec!r}")
    return _record_video(env, video_dir) if video_dir else env


def _is_gymnasium_id(env_spec: Any) -> bool:
    import gymnasium

    from corral.tune.registry import ENV_CREATOR, _global_registry

    if not isinstance(env_spec, str) or _global_registry.contains(ENV_CREATOR, env_spec):
        return False
    return env_spec in gymnasium.registry or ":" in env_spec


def check_video_support() -> None:
    """Fails before the trainer is built: recording needs moviepy, an optional dependency."""
    import importlib.util

    if importlib.util.find_spec("moviepy") is None:
        raise UsageError("--video-dir needs moviepy: pip install moviepy")


def _record_video(env: Any, video_dir: str) -> Any:
    import gymnasium

    try:
        return gymnasium.wrappers.RecordVideo(
            env, video_folder=video_dir, episode_trigger=lambda _: True, disable_logger=True
        )
    except gymnasium.error.Error as e:
        env.close()
        raise UsageError(f"cannot record video: {e}") from None
