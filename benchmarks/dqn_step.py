"""DQN's training step in one process: corral against the hand-written loop, alternated.

`equal_work.py` times whole runs in fresh processes, which adds each side's one-off costs
(torch importing `torch._dynamo` on the first optimiser step, in corral's training time)
and the machine's drift between processes. Here both sides of the `dqn` row live in one
process with one torch thread, are warmed past `learning_starts`, and alternate in
slices of `--steps` steps, first whole steps, then gradient steps alone:

- `step`: one env step and one gradient step. corral: the DQN trainer's
  `training_step()` (sample one step, replay add and sample, learner update, target
  and weight sync). hand: `equal_work.HandDQN`'s `act_and_store` then `update`.
- `update`: the gradient step alone. corral: `learner_group.update` on a 64-row replay
  sample (drawn inside the timed call, like the hand loop's). hand: `HandDQN.update`.

`step - update` is each side's cost of acting, the env and the replay bookkeeping
(corral also computes the Q-values on exploring steps, which the hand loop skips).
Medians over `--repeats` rounds.

Usage:
    python benchmarks/dqn_step.py
    python benchmarks/dqn_step.py --quick
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Iterator
from typing import Any

from _common import emit, log, machine_info, median, ratio


def build(warm_steps: int) -> tuple[Any, Any, Iterator[int]]:
    """(corral's DQN trainer, `HandDQN`, the hand loop's step counter), both sides
    stepped `warm_steps` env steps."""
    import torch
    from equal_work import DQN, HandDQN, corral_config

    torch.set_num_threads(1)
    name, env_id, config = corral_config("dqn", 1, warm_steps)
    from corral.agents.registry import get_trainer_class

    trainer = get_trainer_class(name)(config=config, env=env_id)
    result: dict[str, Any] = {}
    while int(result.get("timesteps_total", 0)) < warm_steps:
        result = trainer.train()
    hand = HandDQN("dqn")
    steps = itertools.count()
    for t in itertools.islice(steps, warm_steps):
        hand.act_and_store(t)
        if t + 1 >= DQN["learning_starts"]:
            hand.update()
    return trainer, hand, steps


def sides(trainer: Any, hand: Any, steps: Iterator[int]) -> dict[str, Any]:
    from equal_work import DQN

    learners = trainer.learner_group
    replay = trainer.local_replay_buffer

    def hand_step() -> None:
        t = next(steps)
        hand.act_and_store(t)
        hand.update()
        if (t + 1) % DQN["target_update"] == 0:
            hand.update_target()

    def corral_update() -> None:
        learners.update(batch=replay.sample(DQN["batch"]), minibatch_size=DQN["batch"])

    return {
        "corral_step": trainer.training_step,
        "hand_step": hand_step,
        "corral_update": corral_update,
        "hand_update": hand.update,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="steps per slice")
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--warm", type=int, default=2000, help="env steps before timing")
    parser.add_argument("--quick", action="store_true", help="smoke test: short slices")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.repeats, args.warm = 20, 1, 1100
    emit({"bench": "dqn_step", "machine": machine_info()})
    log(f"dqn_step: warming both sides for {args.warm} env steps")
    fns = sides(*build(args.warm))
    runs: dict[str, list[float]] = {name: [] for name in fns}
    # Two phases, each alternating corral's and the hand loop's slices: whole steps, then
    # gradient steps alone (interleaving update-only slices with the steps would change
    # the step's own state between slices).
    for phase in (("corral_step", "hand_step"), ("corral_update", "hand_update")):
        for rep in range(args.repeats):
            for name in phase:
                fn = fns[name]
                t0 = time.perf_counter()
                for _ in range(args.steps):
                    fn()
                runs[name].append((time.perf_counter() - t0) / args.steps * 1e6)
            log(f"  {phase[0]} rep {rep}: " + ", ".join(f"{n} {runs[n][-1]:.0f} us" for n in phase))
    us = {name: median(values) for name, values in runs.items()}
    emit(
        {
            "bench": "dqn_step",
            "summary": True,
            "steps_per_slice": args.steps,
            "repeats": args.repeats,
            "median_us": us,
            "runs_us": runs,
            "step_corral_over_hand": ratio(us["corral_step"], us["hand_step"]),
            "update_corral_over_hand": ratio(us["corral_update"], us["hand_update"]),
            "rest_us": {
                "corral": us["corral_step"] - us["corral_update"],
                "hand": us["hand_step"] - us["hand_update"],
            },
        }
    )


if __name__ == "__main__":
    main()
