"""PPO time-to-solve on CartPole-v1: corral against Stable-Baselines3 (and RLlib if installed).

A run trains until a deterministic evaluation (20 episodes on a separate
CartPole-v1 env, fixed seeds) reaches a mean return >= 475, or until the
budget of env steps is spent (then `solved: false`). It reports the training
wall-clock seconds (evaluations excluded: the clock is paused while they run;
construction is reported separately as `setup_s`) and the env steps at the
solving evaluation.

- corral: the tuned example `tuned_examples/ppo/cartpole-ppo.yaml` (read from
  the file), `trainer.train()` in a loop, evaluated after the first `train()`
  call that passes each multiple of `--eval-every` env steps, acting with
  `trainer.compute_single_action(obs, explore=False)`.
- Stable-Baselines3: PPO with RL Zoo's CartPole-v1 hyper-parameters (8 envs,
  n_steps 32, batch_size 256, gae_lambda 0.8, gamma 0.98, n_epochs 20,
  ent_coef 0, learning rate 1e-3 and clip range 0.2 both decaying linearly
  to 0, MlpPolicy), evaluated by a callback at the start of the first rollout
  after each multiple of `--eval-every` env steps (i.e. after the update on
  that batch, like corral), acting with `model.predict(obs, deterministic=True)`.
  With `--sb3-settings corral`, SB3 runs corral's tuned example translated
  instead (same batch, epochs, minibatches, learning rate, clipping, nets):
  equal work per env step, so the ratio compares the two engines.
- RLlib 2.x PPO (new API stack) with RLlib's own tuned CartPole example
  (`RLLIB_TUNED` below), only if `ray.rllib` is importable by this interpreter
  or by the one given with `--rllib-python` (RLlib pins its own gymnasium, so
  it usually lives in a separate virtual environment); otherwise the output
  says `"rllib": "not installed"`.

Each run is a fresh subprocess (no shared warm state between the libraries),
and runs alternate between the libraries seed by seed. Threads: corral's
trainer gives torch in the driver `num_cpus_for_driver` threads (default 1),
so by default (`--threads 1`) every library trains with 1 torch thread;
`--threads N` gives all of them N (corral through `num_cpus_for_driver`), and
`--threads 0` leaves each library at its own default. The thread count seen
during training is recorded per run (`torch_threads`).

Usage:
    python benchmarks/ppo_cartpole.py                # 3 seeds each
    python benchmarks/ppo_cartpole.py --seeds 0 1 2 3 4
    python benchmarks/ppo_cartpole.py --quick        # smoke test: 4096-step budget, 1 seed
    python benchmarks/ppo_cartpole.py --rllib-python /path/to/rllib-venv/bin/python
    python benchmarks/ppo_cartpole.py --libs corral sb3 --sb3-settings corral
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from _common import (
    Tracker,
    emit,
    load_tuned_config,
    log,
    machine_info,
    median,
    ratio,
    run_child,
)

TUNED_YAML = "ppo/cartpole-ppo.yaml"
ENV_ID = "CartPole-v1"
SOLVED_AT = 475.0
EVAL_EPISODES = 20
EVAL_SEED = 10_000

# RL Zoo's hyper-parameters for PPO on CartPole-v1.
ZOO = {
    "n_envs": 8,
    "n_steps": 32,
    "batch_size": 256,
    "gae_lambda": 0.8,
    "gamma": 0.98,
    "n_epochs": 20,
    "ent_coef": 0.0,
    "learning_rate": 1e-3,  # linear to 0
    "clip_range": 0.2,  # linear to 0
}


def new_tracker(eval_every: int) -> Tracker:
    return Tracker(ENV_ID, eval_every, SOLVED_AT, EVAL_EPISODES, EVAL_SEED)


# -- the three libraries (each runs in its own child process) -----------------


def run_corral(seed: int, budget: int, eval_every: int, threads: int) -> dict[str, Any]:
    env_id, config, _ = load_tuned_config(TUNED_YAML)
    # The tracker evaluates on its own schedule with the clock paused; the tuned
    # example's own evaluation (for `corral train`) would be timed as training.
    config = {k: v for k, v in config.items() if not k.startswith("evaluation_")}
    config = {**config, "seed": seed, "log_level": "ERROR"}
    if threads:
        config["num_cpus_for_driver"] = threads
    t0 = time.perf_counter()
    from corral.agents.ppo import PPOTrainer

    trainer = PPOTrainer(config=config, env=env_id)
    setup_s = time.perf_counter() - t0
    tracker = new_tracker(eval_every)
    try:
        steps, iterations = tracker.train(
            lambda: int(trainer.train()["timesteps_total"]),
            lambda obs: trainer.compute_single_action(obs, explore=False),
            budget,
        )
    finally:
        trainer.stop()
    out = tracker.record(steps)
    out.update(setup_s=setup_s, iterations=iterations, config_file=TUNED_YAML)
    return out


def corral_settings_for_sb3() -> dict[str, Any]:
    """corral's tuned example in SB3's terms (`--sb3-settings corral`): equal work per env step.

    SB3 has no constant-clip option through a schedule, so the clip range is a
    constant function; SB3 does not clip the value loss (corral's 10,000 bound
    never binds here).
    """
    _, cfg, _ = load_tuned_config(TUNED_YAML)
    return {
        "n_envs": cfg["num_envs_per_worker"],
        "n_steps": cfg["rollout_fragment_length"],
        "batch_size": cfg["sgd_minibatch_size"],
        "gae_lambda": cfg["lambda"],
        "gamma": cfg["gamma"],
        "n_epochs": cfg["num_sgd_iter"],
        "ent_coef": cfg["entropy_coeff"],
        "learning_rate": cfg["lr"],  # linear to 0, as corral's lr_schedule
        "clip_range": cfg["clip_param"],
        "clip_range_schedule": "constant",
        "vf_coef": cfg["vf_loss_coeff"],
        "max_grad_norm": cfg["grad_clip"],
        "net_arch": cfg["model"]["fcnet_hiddens"],
    }


def run_sb3(
    seed: int, budget: int, eval_every: int, threads: int, settings: str = "zoo"
) -> dict[str, Any]:
    t0 = time.perf_counter()
    import stable_baselines3
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    def linear(start: float) -> Callable[[float], float]:
        return lambda progress_remaining: progress_remaining * start

    hp = dict(ZOO) if settings == "zoo" else corral_settings_for_sb3()
    extra: dict[str, Any] = {}
    if settings == "corral":
        extra = {
            "vf_coef": hp["vf_coef"],
            "max_grad_norm": hp["max_grad_norm"],
            "policy_kwargs": {"net_arch": hp["net_arch"]},
        }
    clip = hp["clip_range"]
    env = make_vec_env(ENV_ID, n_envs=hp["n_envs"], seed=seed)
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=hp["n_steps"],
        batch_size=hp["batch_size"],
        gae_lambda=hp["gae_lambda"],
        gamma=hp["gamma"],
        n_epochs=hp["n_epochs"],
        ent_coef=hp["ent_coef"],
        learning_rate=linear(hp["learning_rate"]),
        clip_range=clip if hp.get("clip_range_schedule") == "constant" else linear(clip),
        seed=seed,
        device="cpu",
        verbose=0,
        **extra,
    )
    setup_s = time.perf_counter() - t0
    tracker = new_tracker(eval_every)
    tracker.train_sb3(model, lambda obs: int(model.predict(obs, deterministic=True)[0]), budget)
    env.close()
    out = tracker.record(model.num_timesteps)
    out.update(
        setup_s=setup_s,
        sb3_version=stable_baselines3.__version__,
        settings=settings,
        hyperparams=hp,
    )
    return out


def _dig(result: dict, *paths: str) -> Any:
    for path in paths:
        node: Any = result
        for key in path.split("/"):
            node = node.get(key) if isinstance(node, dict) else None
        if node is not None:
            return node
    return None


# RLlib's own tuned example for PPO on CartPole-v1 (rllib/tuned_examples/ppo/cartpole_ppo.py
# in Ray 2.x): everything else at RLlib's defaults (train batch 4000, minibatch 128, its
# default env runners).
RLLIB_TUNED = {
    "training": {"lr": 0.0003, "num_epochs": 6, "vf_loss_coeff": 0.01},
    "model": {"fcnet_hiddens": [32], "fcnet_activation": "linear", "vf_share_layers": True},
}


def run_rllib(seed: int, budget: int, eval_every: int, threads: int) -> dict[str, Any]:
    """RLlib 2.x PPO (new API stack) with RLlib's own tuned CartPole example."""
    t0 = time.perf_counter()
    import numpy as np
    import ray
    import torch
    from ray.rllib.algorithms.ppo import PPOConfig

    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    model = RLLIB_TUNED["model"]
    config = PPOConfig().environment(ENV_ID).training(**RLLIB_TUNED["training"])
    try:
        from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

        config = config.rl_module(model_config=DefaultModelConfig(**model))
    except ImportError:  # older 2.x releases take a dict
        config = config.rl_module(model_config_dict=model)
    config = config.debugging(seed=seed)
    algo = config.build_algo() if hasattr(config, "build_algo") else config.build()
    setup_s = time.perf_counter() - t0
    tracker = new_tracker(eval_every)
    module = algo.get_module()

    def act(obs: Any) -> Any:
        with torch.no_grad():
            out = module.forward_inference({"obs": torch.as_tensor(obs[None], dtype=torch.float32)})
        return int(np.argmax(out["action_dist_inputs"][0].numpy()))

    def train_once() -> int:
        result = algo.train()
        paths = ("env_runners/num_env_steps_sampled_lifetime", "num_env_steps_sampled_lifetime")
        return int(_dig(result, *paths, "timesteps_total") or 0)

    try:
        steps, iterations = tracker.train(train_once, act, budget)
    finally:
        algo.stop()
        ray.shutdown()
    out = tracker.record(steps)
    out.update(
        setup_s=setup_s,
        iterations=iterations,
        ray_version=ray.__version__,
        config={**RLLIB_TUNED, "num_env_runners": config.num_env_runners},
    )
    return out


RUNNERS = {"corral": run_corral, "sb3": run_sb3, "rllib": run_rllib}


def rllib_importable(python: str | None) -> bool:
    """Whether `python` (default: this interpreter) can import RLlib's PPO.

    A real import in a subprocess: the `ray` wheel ships the `ray.rllib` package
    even without the `rllib` extra's dependencies, so finding it is not enough.
    """
    probe = subprocess.run(
        [python or sys.executable, "-c", "import ray.rllib.algorithms.ppo"],
        capture_output=True,
    )
    return probe.returncode == 0


def child_main(args: argparse.Namespace) -> None:
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    options = {"settings": args.sb3_settings} if args.child == "sb3" else {}
    out = RUNNERS[args.child](args.seed, args.budget, args.eval_every, args.threads, **options)
    # Read after training: a library may set its own thread count when it starts.
    out["torch_threads"] = torch.get_num_threads()
    print("JSON:" + json.dumps(out), flush=True)


def summarize(lib: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    solved = [r for r in runs if r.get("solved")]
    return {
        "runs": len(runs),
        "solved": len(solved),
        # Medians over solved runs; unsolved runs are counted in `solved`.
        "median_train_s": median(r["train_s"] for r in solved),
        "median_steps": median(r["steps"] for r in solved),
        "median_setup_s": median(r.get("setup_s") for r in runs),
        "median_train_plus_setup_s": median(r["train_s"] + r["setup_s"] for r in solved),
        "median_s_per_1k_steps": median(
            1000 * r["train_s_run"] / r["steps_run"] for r in runs if r.get("steps_run")
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--budget", type=int, default=100_000, help="env steps per run")
    parser.add_argument("--eval-every", type=int, default=2048, help="env steps")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads in every run (0: each library's own default)",
    )
    parser.add_argument("--libs", nargs="+", default=["corral", "sb3", "rllib"])
    parser.add_argument(
        "--sb3-settings",
        choices=["zoo", "corral"],
        default="zoo",
        help="SB3's hyper-parameters: RL Zoo's tuned ones (default), or corral's tuned "
        "example translated (equal work per env step: compares the engines)",
    )
    parser.add_argument(
        "--rllib-python",
        default=None,
        help="interpreter of an environment with ray[rllib] (default: this one)",
    )
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    parser.add_argument("--quick", action="store_true", help="4096-step budget, one seed")
    parser.add_argument("--child", choices=sorted(RUNNERS), help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(args)
        return
    if args.quick:
        args.budget, args.seeds = 4096, args.seeds[:1]

    info = machine_info()
    info["threads_arg"] = args.threads
    libs = list(args.libs)
    header: dict[str, Any] = {"bench": "ppo_cartpole", "machine": info}
    if "rllib" in libs and not rllib_importable(args.rllib_python):
        libs.remove("rllib")
        header["rllib"] = "not installed"
    header.update(
        budget=args.budget,
        eval_every=args.eval_every,
        eval_episodes=EVAL_EPISODES,
        solved_at=SOLVED_AT,
        seeds=args.seeds,
        corral_config=load_tuned_config(TUNED_YAML)[1],
    )
    header["sb3_settings"] = args.sb3_settings
    args.child_args = ["--sb3-settings", args.sb3_settings]
    emit(header)
    runs: dict[str, list[dict[str, Any]]] = {lib: [] for lib in libs}
    for seed in args.seeds:
        for lib in libs:  # alternate the libraries seed by seed
            log(f"ppo_cartpole: {lib} seed {seed}")
            python = args.rllib_python if lib == "rllib" else None
            out = run_child(__file__, lib, seed, args, python=python)
            out = {"bench": "ppo_cartpole", "lib": lib, "seed": seed, **out}
            emit(out)
            if "error" not in out:
                runs[lib].append(out)
    summary: dict[str, Any] = {"bench": "ppo_cartpole", "summary": True}
    for lib, lib_runs in runs.items():
        summary[lib] = summarize(lib, lib_runs)
    if "rllib" in header:
        summary["rllib"] = header["rllib"]
    for ref in ("sb3", "rllib"):
        if "corral" not in runs or ref not in runs:
            continue
        c, r = summary["corral"], summary[ref]
        summary[f"ratio_corral_{ref}"] = {
            "train_s": ratio(c["median_train_s"], r["median_train_s"]),
            "steps": ratio(c["median_steps"], r["median_steps"]),
            "train_plus_setup_s": ratio(
                c["median_train_plus_setup_s"], r["median_train_plus_setup_s"]
            ),
            "s_per_1k_steps": ratio(c["median_s_per_1k_steps"], r["median_s_per_1k_steps"]),
        }
    emit(summary)


if __name__ == "__main__":
    main()
