"""An off-policy training step in one process: corral against the hand-written loop.

`equal_work.py` times whole runs in fresh processes, which adds each side's one-off costs
and the machine's drift between processes. Here both sides of one off-policy row of
`equal_work.py` (`--row`: `dqn`, `dqn_prioritized`, `sac`, `td3`) live in one process
with one torch thread, are warmed past `learning_starts`, and alternate in slices of
`--steps` steps, first whole steps, then gradient steps alone:

- `step`: one env step and one gradient step. corral: a slice is one `train()` of
  `--steps` env steps (`timesteps_per_iteration`), as `equal_work.py` trains: per step,
  its `training_step()` (sample one step, replay add and sample, learner update, target
  and weight sync), and once per slice the iteration's own work (the learner metrics
  reduced, the result compiled and logged). hand: `equal_work.HandDQN`'s or
  `HandContinuous`'s `act_and_store` then `update` (DQN's hard target update every
  `target_update` steps).
- `update`: the gradient step alone. corral: `learner_group.update` on a replay sample
  of one train batch (drawn inside the timed call, like the hand loop's). hand: `update`.
- `act`: the env step alone, with no gradient step between: corral samples one fragment
  from its workers (`synchronous_parallel_sample`) and stores it in the replay buffer
  (`store_sampled`); hand: `act_and_store`.
- `replay`: a gradient step's replay bookkeeping alone: one train batch drawn from the
  buffer and, with prioritized replay, new priorities set from fixed TD errors. corral:
  its replay buffer's `sample` and `update_priorities`; hand: `replay` (the same draw,
  take and priority write as its `update`).

`step - update` is each side's cost of acting, the env and the replay bookkeeping
(corral's DQN also computes the Q-values on exploring steps, which the hand loop skips);
`act` times that part on its own (it runs faster there than between gradient steps, most
likely as their memory traffic evicts the sampling path's data from the caches). Medians
over `--repeats` rounds.

Usage:
    python benchmarks/offpolicy_step.py                # the dqn row
    python benchmarks/offpolicy_step.py --row td3
    python benchmarks/offpolicy_step.py --quick
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

from _common import emit, log, machine_info, median, ratio

# Per row: (env steps before timing, steps per slice) unless given.
DEFAULTS = {"dqn": (2000, 300), "dqn_prioritized": (2000, 300), "sac": (300, 50), "td3": (300, 50)}


def build(row: str, warm_steps: int, slice_steps: int) -> tuple[Any, Any, Iterator[int]]:
    """(corral's trainer, the hand loop, the hand loop's step counter) of `row`, both
    sides stepped `warm_steps` env steps; the trainer's `train()` runs `slice_steps`."""
    import torch
    from equal_work import SETTINGS, HandContinuous, HandDQN, corral_config

    torch.set_num_threads(1)
    name, env_id, config = corral_config(row, 1, warm_steps)
    config["min_sample_timesteps_per_reporting"] = slice_steps  # timesteps_per_iteration
    from corral.agents.registry import get_trainer_class

    trainer = get_trainer_class(name)(config=config, env=env_id)
    result: dict[str, Any] = {}
    while int(result.get("timesteps_total", 0)) < warm_steps:
        result = trainer.train()
    hand = HandDQN(row) if row.startswith("dqn") else HandContinuous(row)
    learning_starts = SETTINGS[row]["learning_starts"]
    steps = itertools.count()
    for t in itertools.islice(steps, warm_steps):
        hand.act_and_store(t)
        if t + 1 >= learning_starts:
            hand.update()
    return trainer, hand, steps


def sides(
    row: str, trainer: Any, hand: Any, steps: Iterator[int], slice_steps: int
) -> dict[str, Callable[[], Any]]:
    """Each side's slice of `slice_steps` steps (corral's whole steps: one `train()`)."""
    import numpy as np
    from equal_work import DQN, SETTINGS

    from corral.execution.rollout_ops import synchronous_parallel_sample
    from corral.utils.replay_buffers.prioritized_replay_buffer import BATCH_INDEXES

    learners = trainer.learner_group
    replay = trainer.local_replay_buffer
    batch_size = SETTINGS[row]["batch"]
    dqn = row.startswith("dqn")

    def hand_step() -> None:
        t = next(steps)
        hand.act_and_store(t)
        hand.update()
        if dqn and (t + 1) % DQN["target_update"] == 0:
            hand.update_target()

    def corral_update() -> None:
        learners.update(batch=replay.sample(batch_size), minibatch_size=batch_size)

    def corral_act() -> None:
        trainer.store_sampled(synchronous_parallel_sample(trainer.workers))

    def hand_act() -> None:
        hand.act_and_store(next(steps))

    # Fixed TD errors for the priorities of the `replay` phase (as float32, as a loss's).
    td = np.random.default_rng(0).normal(size=batch_size).astype(np.float32)
    prioritized = replay.prioritized

    def corral_replay() -> None:
        batch = replay.sample(batch_size)
        if prioritized:
            updates = {
                pid: (b[BATCH_INDEXES], td)
                for pid, b in batch.as_multi_agent().policy_batches.items()
            }
            replay.update_priorities(updates)

    def repeated(fn: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            for _ in range(slice_steps):
                fn()

        return run

    return {
        "corral_step": trainer.train,
        "hand_step": repeated(hand_step),
        "corral_update": repeated(corral_update),
        "hand_update": repeated(hand.update),
        "corral_act": repeated(corral_act),
        "hand_act": repeated(hand_act),
        "corral_replay": repeated(corral_replay),
        "hand_replay": repeated(lambda: hand.replay(td)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--row", choices=sorted(DEFAULTS), default="dqn")
    parser.add_argument("--steps", type=int, help="steps per slice (default: per row)")
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--warm", type=int, help="env steps before timing (default: per row)")
    parser.add_argument("--quick", action="store_true", help="smoke test: short slices")
    args = parser.parse_args()
    warm, slice_steps = DEFAULTS[args.row]
    if args.quick:
        warm, slice_steps, args.repeats = warm // 2 + 100, 20, 1
    args.warm = warm if args.warm is None else args.warm
    args.steps = slice_steps if args.steps is None else args.steps
    emit({"bench": "offpolicy_step", "row": args.row, "machine": machine_info()})
    log(f"offpolicy_step: {args.row}, warming both sides for {args.warm} env steps")
    fns = sides(args.row, *build(args.row, args.warm, args.steps), args.steps)
    runs: dict[str, list[float]] = {name: [] for name in fns}
    # Four phases, each alternating corral's and the hand loop's slices: whole steps,
    # gradient steps alone, env steps alone, replay bookkeeping alone (interleaving the
    # phases would change the step's own state between slices).
    for phase in (
        ("corral_step", "hand_step"),
        ("corral_update", "hand_update"),
        ("corral_act", "hand_act"),
        ("corral_replay", "hand_replay"),
    ):
        for rep in range(args.repeats):
            for name in phase:
                fn = fns[name]
                t0 = time.perf_counter()
                fn()
                runs[name].append((time.perf_counter() - t0) / args.steps * 1e6)
            log(f"  {phase[0]} rep {rep}: " + ", ".join(f"{n} {runs[n][-1]:.0f} us" for n in phase))
    us = {name: median(values) for name, values in runs.items()}
    emit(
        {
            "bench": "offpolicy_step",
            "row": args.row,
            "summary": True,
            "steps_per_slice": args.steps,
            "repeats": args.repeats,
            "median_us": us,
            "runs_us": runs,
            "step_corral_over_hand": ratio(us["corral_step"], us["hand_step"]),
            "update_corral_over_hand": ratio(us["corral_update"], us["hand_update"]),
            "act_corral_over_hand": ratio(us["corral_act"], us["hand_act"]),
            "replay_corral_over_hand": ratio(us["corral_replay"], us["hand_replay"]),
            "rest_us": {
                "corral": us["corral_step"] - us["corral_update"],
                "hand": us["hand_step"] - us["hand_update"],
            },
        }
    )


if __name__ == "__main__":
    main()
