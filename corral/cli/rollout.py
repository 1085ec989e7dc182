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
    trainer: Any, env: Any, seed: int | None = None, max_steps: int | None = None
) -> tuple[float, int, bool]:
    """One episode with the trainer's greedy actions, at most ``max_steps`` long.

    Multi-agent envs act through the trainer's ``policy_mapping_fn``; the
    episode's reward is the sum over its agents, as in RLlib's results.

    Returns:
        (total reward, steps, whether the episode ended by itself).
    """
    from corral.env import MultiAgentEnv

    multi_agent = isinstance(env, MultiAgentEnv)
    mapping: Callable[..., Any] = trainer.config["multiagent"]["policy_mapping_fn"]
    obs, _ = env.reset(seed=seed)
    total, steps, done = 0.0, 0, False
    finished: set = set()  # agents whose own episode ended: they get no more actions
    while not done and (max_steps is None or steps < max_steps):
        if multi_agent:
            actions = {
                agent: trainer.compute_single_action(
                    agent_obs, policy_id=mapping(agent, None, None), explore=False
                )
                for agent, agent_obs in obs.items()
                if agent not in finished
            }
            obs, rewards, terminateds, truncateds, _ = env.step(actions)
            total += float(sum(rewards.values()))
            done = bool(terminateds.get("__all__") or truncateds.get("__all__"))
            finished |= {
                a for a in {*terminateds, *truncateds} if _ended(a, terminateds, truncateds)
            }
        else:
            action = trainer.compute_single_action(obs, explore=False)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        steps += 1
    return total, steps, done


def _ended(agent: Any, terminateds: Mapping, truncateds: Mapping) -> bool:
    return agent != "__all__" and bool(terminateds.get(agent) or truncateds.get(agent))


def make_evaluation_env(
    trainer: Any, env_spec: Any, env_config: Mapping, render: bool, video_dir: str | None
) -> Any:
    """A fresh env to roll out in, set up to render or record when asked.

    Gymnasium ids are made with ``gymnasium.make`` so ``render_mode`` can be
    chosen; other envs (registered names, classes) come from the trainer's
    creator and render as they were built to.
    """
    import gymnasium

    from corral.env import EnvContext, MultiAgentEnv

    render_mode = "rgb_array" if video_dir else "human" if render else None
    try:
        if _is_gymnasium_id(env_spec):
            env = gymnasium.make(env_spec, render_mode=render_mode, **dict(env_config))
        else:
            env = trainer.env_creator(EnvContext(dict(env_config)))
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
