"""Learning from files only, with datasets written by corral's own trainers.

- PPO learns CartPole-v1 from scratch and writes the first 50,000 env steps it samples
  with `output` (as RLlib's own offline tests write their data): poor early episodes and
  good late ones. BC, MARWIL, plain DQN and CQL on DQN each train from those files alone
  and are evaluated in the env. Expert-only data would not do for DQN (it never shows a
  wrong action's cost) nor show MARWIL's advantage weighting.
- SAC writes Pendulum-v1 steps; CQL trains from them alone. `write_expert_data` trains a
  policy online until its greedy evaluation reaches a return, then a second trainer of the
  same algorithm, holding those weights and writing with `output`, samples a fixed number
  of env steps (stochastic actions, as any logged run).

The trainers have no env on the driver (`env=None`, the spaces in the config); a single
evaluation worker has one (`evaluation_config={"input": "sampler", "env": ...}`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import yaml

from corral.agents.cql import CQLDQNTrainer, CQLTrainer
from corral.agents.dqn import DQNTrainer
from corral.agents.marwil import BCTrainer, MARWILTrainer
from corral.agents.ppo import PPOTrainer
from corral.agents.sac import SACTrainer


def write_expert_data(
    trainer_cls: type,
    env: str,
    config: dict[str, Any],
    out_dir: Path,
    *,
    good_return: float,
    max_train_steps: int,
    num_steps: int,
) -> dict[str, Any]:
    """Trains `trainer_cls` on `env` until a greedy evaluation returns `good_return` (or
    `max_train_steps` env steps), then writes `num_steps` env steps with those weights into
    `out_dir`. Returns what happened: the evaluation return reached, steps and seconds."""
    start = time.perf_counter()
    online = trainer_cls(config=config, env=env)
    reached = float("-inf")
    try:
        while True:
            result = online.train()
            if "evaluation" in result:
                reached = result["evaluation"]["episode_reward_mean"]
                if reached >= good_return:
                    break
            if result["timesteps_total"] >= max_train_steps:
                break
        weights = online.get_weights()
        trained_steps = result["timesteps_total"]
    finally:
        online.stop()
    writer_config = {
        **config,
        "output": str(out_dir),
        # Whole episodes per line: returns computed from the files are then cut only
        # where the env cut them (RLlib's advice for MARWIL's input).
        "batch_mode": "complete_episodes",
        "evaluation_interval": None,
        "evaluation_num_workers": 0,
    }
    writer = trainer_cls(config=writer_config, env=env)
    try:
        writer.set_weights(weights)
        worker = writer.workers.local_worker()
        written = 0
        while written < num_steps:
            written += worker.sample().env_steps()
    finally:
        writer.stop()
    return {
        "evaluation_return": reached,
        "trained_steps": trained_steps,
        "written_steps": written,
        "seconds": time.perf_counter() - start,
    }


def write_training_data(
    trainer_cls: type, env: str, config: dict[str, Any], out_dir: Path, *, num_steps: int
) -> dict[str, Any]:
    """Trains `trainer_cls` on `env` from scratch with `output` set to `out_dir` until
    `num_steps` env steps were sampled (and so written). Returns the training return at the
    start and at the end, steps and seconds."""
    start = time.perf_counter()
    writer_config = {
        **config,
        "output": str(out_dir),
        # Whole episodes per line: returns computed from the files are then cut only
        # where the env cut them (RLlib's advice for MARWIL's input).
        "batch_mode": "complete_episodes",
        # No evaluation: its greedy episodes would be written too.
        "evaluation_interval": None,
    }
    trainer = trainer_cls(config=writer_config, env=env)
    returns = []
    try:
        while True:
            result = trainer.train()
            returns.append(result["episode_reward_mean"])
            if result["timesteps_total"] >= num_steps:
                break
    finally:
        trainer.stop()
    return {
        "first_return": returns[0],
        "last_return": returns[-1],
        "written_steps": result["timesteps_total"],
        "seconds": time.perf_counter() - start,
    }


def tuned_config(relative_path: str) -> dict:
    """The config of a tuned example (a module-scoped fixture cannot use `learning`)."""
    path = Path(__file__).parents[2] / "tuned_examples" / relative_path
    (experiment,) = yaml.safe_load(path.read_text()).values()
    return experiment["config"]


THRESHOLD = 400.0
ENV = "CartPole-v1"


@pytest.fixture(scope="module")
def cartpole_files(tmp_path_factory):
    """A folder of JSON files: the first 50,000 steps PPO samples while learning from
    scratch (training return ~20 at the start, ~360 at the end)."""
    out = tmp_path_factory.mktemp("ppo_cartpole")
    config = {**tuned_config("ppo/cartpole-ppo.yaml"), "seed": 0}
    info = write_training_data(PPOTrainer, ENV, config, out, num_steps=50_000)
    print(f"PPO data: {info}")
    assert info["written_steps"] >= 50_000
    # Mixed quality: poor early episodes, good late ones.
    assert info["first_return"] < 50.0 and info["last_return"] > 250.0, info
    files = list(out.iterdir())
    assert files and all(p.name.endswith(".json") for p in files)
    return out


def offline_config(files: Path, tuned: dict, env: str = ENV) -> dict:
    """A tuned example's config reading `files`, with no env on the driver (the spaces
    given instead) and the env on the evaluation worker."""
    space = gym.make(env)
    return {
        **tuned,
        "input": str(files),
        "observation_space": space.observation_space,
        "action_space": space.action_space,
        "seed": 0,
        "evaluation_config": {**tuned["evaluation_config"], "env": env},
    }


def run(learning, trainer, max_steps: int, threshold: float = THRESHOLD) -> list:
    curve = learning.train_until(trainer, threshold, max_steps)
    print(f"{type(trainer).__name__}: {curve}")
    return curve


# Evaluation returns reached, by trainer, for the tests that compare with one another.
REACHED: dict[str, float] = {}


@pytest.mark.learning
def test_bc_from_ppo_files(cartpole_files, learning):
    config = offline_config(cartpole_files, tuned_config("bc/cartpole-bc.yaml"))
    trainer = BCTrainer(config=config)
    assert trainer.workers.local_worker().env is None
    curve = run(learning, trainer, 150_000)
    REACHED["BC"] = curve[-1][1]
    assert curve[-1][1] >= THRESHOLD, curve


@pytest.mark.learning
def test_marwil_from_ppo_files(cartpole_files, learning):
    # "At least as high" as BC: MARWIL trains until it evaluates at BC's return (the test
    # above, run first in this file) or more, within the same budget of steps read; run
    # alone, the bar is THRESHOLD.
    bar = max(THRESHOLD, REACHED.get("BC", THRESHOLD))
    config = offline_config(cartpole_files, tuned_config("marwil/cartpole-marwil.yaml"))
    curve = run(learning, MARWILTrainer(config=config), 150_000, bar)
    assert curve[-1][1] >= bar, (curve, REACHED)


@pytest.mark.learning
def test_dqn_from_ppo_files(cartpole_files, learning):
    # Plain DQN (no conservative term): the files hold PPO's poor early actions next to
    # its good late ones, which is what Q-learning needs to tell them apart.
    config = offline_config(cartpole_files, tuned_config("dqn/cartpole-dqn-offline.yaml"))
    curve = run(learning, DQNTrainer(config=config), 40_000)
    assert curve[-1][1] >= THRESHOLD, curve


@pytest.mark.learning
def test_cql_dqn_from_ppo_files(cartpole_files, learning):
    config = offline_config(cartpole_files, tuned_config("cql/cartpole-cql-dqn.yaml"))
    curve = run(learning, CQLDQNTrainer(config=config), 40_000)
    assert curve[-1][1] >= THRESHOLD, curve


PENDULUM = "Pendulum-v1"
PENDULUM_THRESHOLD = -400.0


@pytest.fixture(scope="module")
def pendulum_files(tmp_path_factory):
    """A folder of JSON files: 20,000 steps of a SAC policy whose greedy return is ~-200."""
    out = tmp_path_factory.mktemp("sac_pendulum")
    config = {
        **tuned_config("sac/pendulum-sac.yaml"),
        "seed": 0,
        "evaluation_interval": 1,
        "evaluation_num_episodes": 5,
    }
    info = write_expert_data(
        SACTrainer,
        PENDULUM,
        config,
        out,
        good_return=-250.0,
        max_train_steps=30_000,
        num_steps=20_000,
    )
    print(f"SAC data: {info}")
    assert info["evaluation_return"] >= -250.0 and info["written_steps"] >= 20_000
    return out


@pytest.mark.learning
def test_cql_from_sac_files(pendulum_files, learning):
    config = offline_config(pendulum_files, tuned_config("cql/pendulum-cql.yaml"), PENDULUM)
    trainer = CQLTrainer(config=config)
    policy = trainer.get_policy()
    curve = run(learning, trainer, 20_000, PENDULUM_THRESHOLD)
    # Past the behaviour-cloning phase: the actor maximised the conservative Q.
    assert policy.cur_iter > config["bc_iters"]
    assert curve[-1][1] >= PENDULUM_THRESHOLD, curve
