"""What ``corral train`` prints when a run ends: the figures reached, where the logs and
checkpoints are, and the demo's verdict ("Solved CartPole-v1: ...").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from corral.cli.progress import format_duration
from corral.tune.result import (
    EPISODE_REWARD_MEAN,
    EVALUATION,
    EVALUATION_EPISODES_THIS_ITER,
    EVALUATION_REWARD_MEAN,
    TIME_TOTAL_S,
    TIMESTEPS_TOTAL,
    TRAINING_ITERATION,
)
from corral.tune.stopping import is_number, lookup_result


@dataclass
class TrainOutcome:
    """What a training run reached; the summary is printed from it."""

    logdir: str
    last_result: dict = field(default_factory=dict)
    best_reward: float | None = None
    best_reward_iteration: int | None = None
    best_eval_reward: float | None = None
    last_checkpoint: str | None = None
    interrupted: bool = False
    env: str | None = None
    stop: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    # The stop criterion that ended the run, as (key, value).
    met: tuple[str, float] | None = None

    def record(self, result: Mapping) -> None:
        """Keeps the latest result and the best mean rewards seen so far."""
        self.last_result = dict(result)
        reward = result.get(EPISODE_REWARD_MEAN)
        if is_number(reward) and (self.best_reward is None or reward > self.best_reward):
            self.best_reward = reward
            self.best_reward_iteration = result.get(TRAINING_ITERATION)
        evaluation = lookup_result(result, EVALUATION_REWARD_MEAN)
        if is_number(evaluation) and (
            self.best_eval_reward is None or evaluation > self.best_eval_reward
        ):
            self.best_eval_reward = evaluation


def print_summary(outcome: TrainOutcome, stream: IO[str]) -> None:
    """The final figures, the logdir and the last checkpoint: what to look at next."""
    result = outcome.last_result
    verb = "interrupted" if outcome.interrupted else "finished"
    lines = [
        f"Training {verb} after {result.get(TRAINING_ITERATION, 0)} iterations "
        f"({result.get(TIMESTEPS_TOTAL) or 0:,} timesteps, "
        f"{format_duration(result.get(TIME_TOTAL_S) or 0.0)}).",
    ]
    if outcome.best_reward is not None:
        lines.append(
            f"  best {EPISODE_REWARD_MEAN}: {outcome.best_reward:.2f} "
            f"(iteration {outcome.best_reward_iteration})"
        )
    if outcome.best_eval_reward is not None:
        lines.append(f"  best {EVALUATION_REWARD_MEAN}: {outcome.best_eval_reward:.2f}")
    lines.append(f"  logdir: {outcome.logdir}")
    lines.append(f"  last checkpoint: {outcome.last_checkpoint or 'none'}")
    verdict = solved_line(outcome)
    if verdict:
        lines.append(verdict)
    stream.write("\n".join(lines) + "\n")
    stream.flush()


_RETURN_KEYS = (EVALUATION_REWARD_MEAN, EPISODE_REWARD_MEAN)


def solved_line(outcome: TrainOutcome) -> str | None:
    """``Solved CartPole-v1: evaluation return 500.0 (10 episodes, greedy) after 12,288 env
    steps, 6.1 s of training`` when a return criterion ended the run; ``Not solved: ...``
    when the stop criteria had one and another criterion (or Ctrl-C) came first."""
    goals = [k for k in _RETURN_KEYS if k in outcome.stop]
    if not goals:
        return None
    result = outcome.last_result
    steps = result.get(TIMESTEPS_TOTAL) or 0
    seconds = result.get(TIME_TOTAL_S) or 0.0
    if outcome.met is not None and outcome.met[0] in goals:
        key, value = outcome.met
        if key.startswith(f"{EVALUATION}/"):
            episodes = lookup_result(result, EVALUATION_EPISODES_THIS_ITER)
            explore = (outcome.config.get("evaluation_config") or {}).get(
                "explore", outcome.config.get("explore", True)
            )
            detail = ", ".join(
                ([f"{episodes} episodes"] if is_number(episodes) else [])
                + ([] if explore else ["greedy"])
            )
            what = f"evaluation return {value:.1f}" + (f" ({detail})" if detail else "")
        else:
            what = f"training return {value:.1f} (mean of the last episodes)"
        goal = outcome.stop[key]
        threshold = _reward_threshold(outcome.env)
        verb = (
            f"Reached {key} >= {goal:g} on {outcome.env} (its reward threshold is {threshold:g})"
            if threshold is not None and goal < threshold
            else f"Solved {outcome.env}"
        )
        return f"{verb}: {what} after {steps:,} env steps, {seconds:.1f} s of training"
    key = goals[0]
    best = outcome.best_eval_reward if key.startswith(f"{EVALUATION}/") else outcome.best_reward
    best_text = "n/a" if best is None else f"{best:.1f}"
    return (
        f"Not solved: best {key} {best_text} < {outcome.stop[key]} after {steps:,} env steps, "
        f"{seconds:.1f} s of training"
    )


def _reward_threshold(env: Any) -> float | None:
    """The return at which Gymnasium calls the env solved (None: unknown or none)."""
    if not isinstance(env, str):
        return None
    import gymnasium

    spec = gymnasium.registry.get(env)
    threshold = getattr(spec, "reward_threshold", None)
    return float(threshold) if is_number(threshold) else None
