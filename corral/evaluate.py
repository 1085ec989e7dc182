"""RLlib 1.13's ``rllib evaluate`` script as a module (``ray.rllib.evaluate``).

User code that imports the script's pieces runs on corral's command line
(`corral.cli`): :func:`create_parser` holds RLlib 1.13's flags, :func:`run` restores the
trainer with ``corral evaluate``'s code (`corral.cli.evaluate.rollout_trainer`) and
:func:`rollout` steps the env with the trainer's policies in ``corral evaluate``'s
episodes (`corral.cli.rollout.run_episode`), feeding a :class:`RolloutSaver`.

    from corral.evaluate import RolloutSaver, rollout

    with RolloutSaver("rollouts.pkl", target_steps=1000) as saver:
        rollout(trainer, "CartPole-v1", num_steps=1000, saver=saver)

Where corral differs from RLlib 1.13:

- the config comes from the checkpoint itself (or the trial's ``params.json``), never
  from ``params.pkl``: nothing a checkpoint's files say is executed (values that were
  code fall back to their defaults; a multi-agent checkpoint's agents act with the
  policy named like them, or ``--policy``'s);
- :func:`rollout` always steps an env itself with the trainer's policies (RLlib ran the
  trainer's evaluation workers when it had them, leaving the saved rollouts empty), so
  ``--out`` holds every step;
- ``--local-mode`` has no effect (there is no Ray cluster to start).
"""

from __future__ import annotations

import argparse
import collections
import os
import pickle
import shelve
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from corral.cli.common import UsageError, json_object, non_negative_int
from corral.cli.evaluate import rollout_trainer
from corral.cli.rollout import check_video_support, make_evaluation_env, run_episode
from corral.policy.sample_batch import DEFAULT_POLICY_ID
from corral.utils import merge_dicts
from corral.utils.deprecation import deprecation_warning

__all__ = [
    "EXAMPLE_USAGE",
    "DefaultMapping",
    "RolloutSaver",
    "create_parser",
    "default_policy_agent_mapping",
    "keep_going",
    "main",
    "rollout",
    "run",
]

EXAMPLE_USAGE = """
Example usage via the corral command (RLlib's `rllib evaluate`):
    corral evaluate ~/ray_results/default/PPO_CartPole-v1_0/checkpoint_000010
    --steps 1000 --episodes 5

Example usage via this module (RLlib 1.13's flags, rollouts pickled to --out):
    python -m corral.evaluate ~/ray_results/default/PPO_CartPole-v1_0/checkpoint_000010
    --run PPO --env CartPole-v1 --steps 1000000 --out rollouts.pkl

Example usage w/o checkpoint (for testing purposes):
    python -m corral.evaluate --run PPO --env CartPole-v1 --episodes 500
"""


def create_parser(parser_creator: Any = None) -> argparse.ArgumentParser:
    """RLlib 1.13's ``rllib evaluate`` parser (``parser_creator(**kwargs)`` builds it, e.g.
    a subparser; default ``argparse.ArgumentParser``), with corral's ``--policy`` and
    ``--seed``."""
    parser_creator = parser_creator or argparse.ArgumentParser
    parser = parser_creator(
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Roll out a reinforcement learning agent given a checkpoint.",
        epilog=EXAMPLE_USAGE,
    )
    parser.add_argument(
        "checkpoint",
        nargs="?",
        help="(Optional) checkpoint (folder, or a file in it) to roll out; without one, "
        "a new (untrained) trainer rolls out",
    )
    named = parser.add_argument_group("named arguments")
    named.add_argument(
        "--run",
        help="the algorithm, e.g. PPO (default: the one that wrote the checkpoint; "
        "required without a checkpoint)",
    )
    named.add_argument(
        "--env",
        help="Gymnasium id, registered env name or dotted class path (default: the one "
        "the checkpoint was trained on)",
    )
    parser.add_argument("--local-mode", action="store_true", help="no effect (no Ray cluster)")
    parser.add_argument("--render", action="store_true", help="render the env while evaluating")
    parser.add_argument(
        "--no-render",
        action="store_true",
        help="deprecated: rendering is off by default; use --render to enable it",
    )
    parser.add_argument("--video-dir", help="record each episode as mp4 here (needs moviepy)")
    parser.add_argument(
        "--steps",
        type=non_negative_int,
        default=10000,
        help="env steps to roll out (the rollout also stops at --episodes); 0: no limit",
    )
    parser.add_argument(
        "--episodes",
        type=non_negative_int,
        default=0,
        help="complete episodes to roll out (the rollout also stops at --steps); 0: no limit",
    )
    parser.add_argument(
        "--out", help="pickle the rollouts to this file (a list of episodes, each a list of steps)"
    )
    parser.add_argument(
        "--config",
        type=json_object,
        default={},
        help="config overrides as a JSON object, merged over the checkpoint's config and "
        "its evaluation_config",
    )
    parser.add_argument(
        "--save-info", action="store_true", help="also save each step's info in --out"
    )
    parser.add_argument(
        "--use-shelve",
        action="store_true",
        help="write --out as a Python shelf, each episode as it ends",
    )
    parser.add_argument(
        "--track-progress",
        action="store_true",
        help="keep the progress in a file __progress_<out> next to --out while rolling out",
    )
    parser.add_argument(
        "--policy",
        help="multi-agent checkpoints: the policy every agent acts with (default: the "
        "policy named like the agent, or the only one)",
    )
    parser.add_argument("--seed", type=int, help="seed of the trainer and the first env reset")
    return parser


class RolloutSaver:
    """Keeps the steps of a rollout and writes them to ``outfile`` (RLlib's layout).

    Without ``use_shelve`` the rollouts are pickled to ``outfile`` as one list when the
    ``with`` block ends: a list of episodes, each a list of steps ``[obs, action,
    next_obs, reward, done]`` (``info`` appended with ``save_info``). With ``use_shelve``,
    ``outfile`` is a ``shelve`` database holding each episode under its index as a
    string as soon as it ends, and the count under ``"num_episodes"``::

        with shelve.open("rollouts.pkl") as rollouts:
            for index in range(rollouts["num_episodes"]):
                episode = rollouts[str(index)]

    ``write_update_file`` keeps the progress (``"3 / 10 episodes completed"``, of
    ``target_episodes`` or ``target_steps``) in ``__progress_<outfile name>`` next to
    ``outfile`` while the block runs. Without an ``outfile`` it only counts.
    """

    def __init__(
        self,
        outfile: str | None = None,
        use_shelve: bool = False,
        write_update_file: bool = False,
        target_steps: int | None = None,
        target_episodes: int | None = None,
        save_info: bool = False,
    ) -> None:
        self._outfile = outfile
        self._use_shelve = use_shelve
        self._write_update_file = write_update_file
        self._target_steps = target_steps
        self._target_episodes = target_episodes
        self._save_info = save_info
        self._shelf: shelve.Shelf | None = None
        self._update_file: IO[str] | None = None
        self._rollouts: list[list] = []
        self._current_rollout: list[list] = []
        self._num_episodes = 0
        self._total_steps = 0

    @property
    def outfile(self) -> str | None:
        """Where the rollouts go (``None``: nowhere)."""
        return self._outfile

    def _progress_path(self) -> Path:
        out = Path(self._outfile or "")
        return out.parent / f"__progress_{out.name}"

    def __enter__(self) -> RolloutSaver:
        if self._outfile:
            if self._use_shelve:
                self._shelf = shelve.open(self._outfile)
            else:
                # Fails now, before any episode is run, if the file cannot be written.
                try:
                    with open(self._outfile, "wb"):
                        pass
                except OSError:
                    print(f"Can not open {self._outfile} for writing - cancelling rollouts.")
                    raise
            if self._write_update_file:
                self._update_file = self._progress_path().open("w")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._shelf is not None:
            self._shelf["num_episodes"] = self._num_episodes
            self._shelf.close()
            self._shelf = None
        elif self._outfile and not self._use_shelve:
            with open(self._outfile, "wb") as f:
                pickle.dump(self._rollouts, f)
        if self._update_file is not None:
            self._update_file.close()
            self._progress_path().unlink()
            self._update_file = None

    def _get_progress(self) -> str:
        if self._target_episodes:
            return f"{self._num_episodes} / {self._target_episodes} episodes completed"
        if self._target_steps:
            return f"{self._total_steps} / {self._target_steps} steps completed"
        return f"{self._num_episodes} episodes completed"

    def begin_rollout(self) -> None:
        """Starts a new episode."""
        self._current_rollout = []

    def end_rollout(self) -> None:
        """Ends the episode: kept (shelve: written), counted, the progress file updated."""
        if self._outfile:
            if self._shelf is not None:
                self._shelf[str(self._num_episodes)] = self._current_rollout
            else:
                self._rollouts.append(self._current_rollout)
        self._num_episodes += 1
        if self._update_file is not None:
            self._update_file.seek(0)
            self._update_file.write(self._get_progress() + "\n")
            self._update_file.flush()

    def append_step(
        self, obs: Any, action: Any, next_obs: Any, reward: Any, done: bool, info: Any
    ) -> None:
        """Adds a step to the episode (kept only with an ``outfile``)."""
        if self._outfile:
            step = [obs, action, next_obs, reward, done]
            if self._save_info:
                step.append(info)
            self._current_rollout.append(step)
        self._total_steps += 1


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Rolls out ``args.checkpoint`` (``create_parser``'s flags): restores the trainer with
    its config's ``evaluation_config`` and ``--config`` merged over it, then
    :func:`rollout` into a :class:`RolloutSaver` for ``--out``.

    Mistakes in the flags or the checkpoint end in ``parser.error`` (exit status 2).
    """
    if args.use_shelve and not args.out:
        parser.error("--use-shelve needs an output file: give --out")
    if args.track_progress and not args.out:
        parser.error("--track-progress needs an output file: give --out")
    if args.no_render:
        deprecation_warning(old="--no-render", new="--render", error=False)
        args.render = False
    overrides = dict(args.config)
    try:
        if args.video_dir:
            check_video_support()
        with rollout_trainer(
            args.checkpoint,
            args.run,
            args.env or overrides.get("env"),
            overrides,
            args.seed,
            args.policy,
        ) as (trainer, env, _):
            # As RLlib's script: the evaluation_config is merged over the config.
            config = merge_dicts(trainer.config, trainer.config.get("evaluation_config") or {})
            video_dir = os.path.expanduser(args.video_dir) if args.video_dir else None
            with RolloutSaver(
                args.out,
                args.use_shelve,
                write_update_file=args.track_progress,
                target_steps=args.steps,
                target_episodes=args.episodes,
                save_info=args.save_info,
            ) as saver:
                _rollout(
                    trainer,
                    env,
                    config.get("env_config") or {},
                    config.get("explore"),
                    args.steps,
                    args.episodes,
                    saver,
                    not args.render,
                    video_dir,
                    args.seed,
                )
    except UsageError as e:
        parser.error(str(e))


class DefaultMapping(collections.defaultdict):
    """A ``defaultdict`` whose ``default_factory`` gets the missing key."""

    def __missing__(self, key: Any) -> Any:
        factory: Any = self.default_factory
        if factory is None:
            raise KeyError(key)
        self[key] = value = factory(key)
        return value


def default_policy_agent_mapping(unused_agent_id: Any) -> str:
    """Every agent acts with the default policy."""
    return DEFAULT_POLICY_ID


def keep_going(steps: int, num_steps: int, episodes: int, num_episodes: int) -> bool:
    """Whether to go on: neither ``num_episodes`` nor ``num_steps`` (each 0: no limit)
    is reached."""
    if num_episodes and episodes >= num_episodes:
        return False
    return not (num_steps and steps >= num_steps)


def rollout(
    agent: Any,
    env_name: Any,
    num_steps: int,
    num_episodes: int = 0,
    saver: RolloutSaver | None = None,
    no_render: bool = True,
    video_dir: str | None = None,
) -> None:
    """Steps a new ``env_name`` env (default: the trainer's env) with ``agent``'s policies
    until ``num_steps`` steps or ``num_episodes`` complete episodes (0: no limit),
    feeding each episode to ``saver`` and printing its reward.

    Multi-agent envs act through the trainer's ``policy_mapping_fn``; recurrent
    policies carry their state. Actions explore as the trainer's config says.
    ``no_render=False`` shows the env (render mode ``human``), ``video_dir`` records
    each episode there (needs moviepy).
    """
    if video_dir:
        check_video_support()
    config = agent.config
    _rollout(
        agent,
        env_name or config["env"],
        config.get("env_config") or {},
        config.get("explore"),
        num_steps,
        num_episodes,
        saver,
        no_render,
        video_dir,
    )


def _rollout(
    agent: Any,
    env_spec: Any,
    env_config: Any,
    explore: bool | None,
    num_steps: int,
    num_episodes: int,
    saver: RolloutSaver | None,
    no_render: bool,
    video_dir: str | None,
    seed: int | None = None,
) -> None:
    saver = saver if saver is not None else RolloutSaver()
    env = make_evaluation_env(agent, env_spec, env_config, not no_render, video_dir)
    steps = episodes = 0
    try:
        while keep_going(steps, num_steps, episodes, num_episodes):
            saver.begin_rollout()
            reward, length, finished = run_episode(
                agent,
                env,
                seed if steps == 0 else None,
                max_steps=num_steps - steps if num_steps else None,
                explore=explore,
                on_step=saver.append_step,
            )
            steps += length
            saver.end_rollout()
            print(f"Episode #{episodes}: reward: {reward}")
            if finished:
                episodes += 1
    finally:
        env.close()


def main() -> None:
    """``python -m corral.evaluate``: :func:`run` with the command line's flags."""
    parser = create_parser()
    run(parser.parse_args(), parser)


if __name__ == "__main__":
    main()
