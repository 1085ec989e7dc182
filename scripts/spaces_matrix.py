"""Which algorithm trains on which observation and action spaces: a Markdown table.

Every available algorithm (from ``corral.agents.registry``) runs one tiny training
iteration on a ``RandomEnv`` for each pair of spaces below. A cell is "yes" when it
trained, or the name of the refused space when the algorithm raised
``UnsupportedSpaceException``; any other error is a bug and is shown as "ERROR".

    python scripts/spaces_matrix.py > docs/spaces.md

``tests/models/test_spaces_matrix.py`` runs the same cells and fails on "ERROR".
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import warnings
from typing import Any

import gymnasium as gym
import numpy as np

from corral.env.multi_agent_env import make_multi_agent
from corral.env.random_env import RandomEnv
from corral.utils.error import UnsupportedSpaceException

_BOX = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)

OBSERVATION_SPACES: dict[str, gym.Space] = {
    "Discrete(5)": gym.spaces.Discrete(5),
    "MultiDiscrete([3, 4])": gym.spaces.MultiDiscrete([3, 4]),
    "MultiBinary(4)": gym.spaces.MultiBinary(4),
    "Box(4,)": _BOX,
    "Box(2, 3)": gym.spaces.Box(-1.0, 1.0, (2, 3), np.float32),
    "Box(42, 42, 3) image": gym.spaces.Box(0, 255, (42, 42, 3), np.uint8),
    "Dict(Box, Discrete)": gym.spaces.Dict(
        {"pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32), "id": gym.spaces.Discrete(3)}
    ),
    "Tuple(Discrete, Box)": gym.spaces.Tuple(
        (gym.spaces.Discrete(2), gym.spaces.Box(-1.0, 1.0, (3,), np.float32))
    ),
}

ACTION_SPACES: dict[str, gym.Space] = {
    "Discrete(3)": gym.spaces.Discrete(3),
    "MultiDiscrete([2, 3])": gym.spaces.MultiDiscrete([2, 3]),
    "Box(2,)": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
    # An integer Box: a categorical per element over its values low..high.
    "Box(2, 3) int32": gym.spaces.Box(0, 3, (2, 3), np.int32),
    "Tuple(Discrete, Box)": gym.spaces.Tuple(
        (gym.spaces.Discrete(2), gym.spaces.Box(-1.0, 1.0, (2,), np.float32))
    ),
    "Dict(Discrete, Box)": gym.spaces.Dict(
        {"move": gym.spaces.Discrete(3), "force": gym.spaces.Box(-1.0, 1.0, (1,), np.float32)}
    ),
}

# Settings that make one iteration of any algorithm take well under a second; each
# algorithm gets the keys its DEFAULT_CONFIG knows.
_TINY: dict[str, Any] = {
    "num_workers": 0,
    "rollout_fragment_length": 16,
    "train_batch_size": 32,
    "sgd_minibatch_size": 16,
    "num_sgd_iter": 1,
    "timesteps_per_iteration": 32,
    "learning_starts": 16,
    "min_iter_time_s": 0,
    # RLlib 1.13's name of the same key: APPO's defaults set it (10 s per iteration).
    "min_time_s_per_reporting": 0,
    "seed": 0,
    "model": {"fcnet_hiddens": [8], "post_fcnet_hiddens": []},
    "Q_model": {"fcnet_hiddens": [8]},
    "policy_model": {"fcnet_hiddens": [8]},
    "actor_hiddens": [8],
    "critic_hiddens": [8],
    "hiddens": [8],
    "replay_buffer_config": {"capacity": 1000},
    # ES's and ARS's shared noise table: 1 GB at their default (250,000,000 values), a
    # few seconds to draw per cell; 10,000,000 cover the default conv stack's weights.
    "noise_size": 10_000_000,
    # ES's perturbed episodes per step (1,000 by default), ARS's directions (32).
    "episodes_per_batch": 4,
    "num_rollouts": 4,
    "rollouts_used": 4,
}


def available_algorithms() -> list[str]:
    """The names the registry can build now, one per trainer class (aliases such as
    "APEX"/"ApeX" are left out, and so are planned algorithms that are not built yet)."""
    from corral.agents import registry

    names, seen = [], set()
    for name in [*registry._ALGORITHMS, *registry.not_built_algorithms()]:
        try:
            cls = registry.get_trainer_class(name)
        except (NotImplementedError, ValueError, ImportError):
            continue
        if cls not in seen:
            seen.add(cls)
            names.append(name)
    return names


# What an algorithm needs on top (its recurrent nets: R2D2's and RNNSAC's models must
# be LSTMs, as in RLlib 1.13).
_NEEDS: dict[str, dict[str, Any]] = {
    "R2D2": {"model": {**_TINY["model"], "use_lstm": True, "lstm_cell_size": 8, "max_seq_len": 4}},
    "RNNSAC": {
        "Q_model": {"fcnet_hiddens": [8], "use_lstm": True, "lstm_cell_size": 8},
        "policy_model": {"fcnet_hiddens": [8], "use_lstm": True, "lstm_cell_size": 8},
        "model": {"max_seq_len": 4},
    },
    # DD-PPO learns on its remote rollout workers (at least one) and sizes each
    # worker's batch itself (`rollout_fragment_length * num_envs_per_worker`).
    "DDPPO": {"num_workers": 1, "num_envs_per_worker": 1, "train_batch_size": -1},
    # MAML: one task per remote rollout worker (RandomEnv has no tasks to set); its inner
    # step is plain SGD (inner_lr 0.1), which raw 0-255 pixels blow up unless clipped.
    "MAML": {
        "num_workers": 1,
        "use_meta_env": False,
        "maml_optimizer_steps": 1,
        "grad_clip": 1.0,
    },
    # Dreamer: chunks that fit RandomEnv's 8-step episodes, tiny networks, a short prefill.
    "DREAMER": {
        "prefill_timesteps": 16,
        "dreamer_train_iters": 1,
        "batch_size": 2,
        "batch_length": 4,
        "imagine_horizon": 2,
        "dreamer_model": {"deter_size": 8, "stoch_size": 4, "depth_size": 2, "hidden_size": 8},
    },
    # MB-MPO: one remote worker imagines with the one model of a tiny ensemble.
    "MBMPO": {
        "num_workers": 1,
        "horizon": 8,
        "num_maml_steps": 1,
        "maml_optimizer_steps": 1,
        "dynamics_model": {
            "ensemble_size": 1,
            "fcnet_hiddens": [8],
            "train_epochs": 1,
            "batch_size": 16,
        },
        "exploration_config": {"random_timesteps": 16},
    },
    # AlphaStar: a small league (main, a random policy and one exploiter of each kind).
    "AlphaStar": {
        "league_builder_config": {
            "num_learning_league_exploiters": 1,
            "num_learning_main_exploiters": 1,
        },
    },
}

# Algorithms that need a multi-agent env: two RandomEnv players (agents 0 and 1).
_MULTI_AGENT = {"AlphaStar"}


class RandomEnvWithReward(RandomEnv):
    """RandomEnv with the batched reward function model-based algorithms ask of an env."""

    def reward(self, obs: Any, action: Any, obs_next: Any) -> np.ndarray:
        return np.zeros(len(obs), np.float32)


# Algorithms that need more of the env than RandomEnv has.
_ENVS: dict[str, type] = {"MBMPO": RandomEnvWithReward}


def tiny_config(trainer_cls: type, obs_space: gym.Space, action_space: gym.Space) -> dict:
    defaults = trainer_cls.get_default_config()
    config = {k: v for k, v in _TINY.items() if not defaults or k in defaults}
    config.update(_NEEDS.get(getattr(trainer_cls, "_name", ""), {}))
    config["env_config"] = {
        "observation_space": obs_space,
        "action_space": action_space,
        "max_episode_len": 8,
    }
    if getattr(trainer_cls, "_name", "") in _MULTI_AGENT:
        config["env_config"]["num_agents"] = 2
    return config


def run_cell(algorithm: str, obs_space: gym.Space, action_space: gym.Space) -> str:
    """Train one iteration: "yes", or the refused space's message ("ERROR: ..." for bugs)."""
    from corral.agents.registry import get_trainer_class

    trainer_cls = get_trainer_class(algorithm)
    trainer = None
    try:
        with tempfile.TemporaryDirectory() as logdir, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from corral.tune.logger import UnifiedLogger

            trainer = trainer_cls(
                config=tiny_config(trainer_cls, obs_space, action_space),
                env=(
                    make_multi_agent(RandomEnv)
                    if algorithm in _MULTI_AGENT
                    else _ENVS.get(algorithm, RandomEnv)
                ),
                logger_creator=lambda cfg: UnifiedLogger(cfg, logdir, loggers=[]),
            )
            trainer.train()
            return "yes"
    except UnsupportedSpaceException as err:
        return f"unsupported: {err}"
    except Exception as err:  # noqa: BLE001 - the matrix reports every other failure
        return f"ERROR: {type(err).__name__}: {err}"
    finally:
        if trainer is not None:
            trainer.stop()


def _cell_text(result: str, obs_space: gym.Space, action_space: gym.Space) -> str:
    if result == "yes":
        return "yes"
    if result.startswith("unsupported"):
        # Say which of the two spaces was refused (the exception names it; the observation
        # space's text is taken out first, as it may contain the action space's).
        rest = result.replace(str(obs_space), "")
        if str(action_space) in rest or "action space" in rest.lower():
            return "no (action space)"
        return "no (observation space)"
    return "ERROR"


def markdown(algorithms: list[str]) -> str:
    lines = [
        "# Supported spaces",
        "",
        "Generated by `python scripts/spaces_matrix.py`: one tiny training iteration per cell",
        'on `corral.env.random_env.RandomEnv`. "yes": it trained; "no (...)": the algorithm',
        "raised `UnsupportedSpaceException` naming that space. Rows: observation spaces;",
        "columns: action spaces. Tuple/Dict actions travel as flat rows and reach the env",
        "as tuples/dicts; Dict/Tuple observations are flattened (discrete parts one-hot), and with",
        "an image part the policy-gradient algorithms' default model (`ComplexInputNetwork`) gives",
        "each image its own conv trunk. With `_disable_action_flattening` Tuple/Dict actions stay",
        "nested in the batches, and with `_disable_preprocessor_api` the policy-gradient",
        "algorithms' models get the observations unflattened (see the Policy section of",
        "[Concepts](concepts.md)). An integer-dtype `Box` action space (any shape, e.g.",
        "`Box(0, 3, (2, 3), np.int32)`) gets one categorical per element over its",
        "`high - low + 1` values, as in RLlib 1.13; its actions are the values themselves",
        "(in `[low, high]`, the space's shape and dtype) in the env and in the sample batches",
        "(RLlib 1.13 kept 0-based indices in the batches). The continuous-only algorithms",
        "(DDPG, TD3, SAC and CQL on Box actions, Dreamer) refuse it.",
        "",
    ]
    for algorithm in algorithms:
        lines += [f"## {algorithm}", ""]
        lines.append("| observation \\ action | " + " | ".join(ACTION_SPACES) + " |")
        lines.append("|---" * (len(ACTION_SPACES) + 1) + "|")
        for obs_name, obs_space in OBSERVATION_SPACES.items():
            cells = [
                _cell_text(run_cell(algorithm, obs_space, act_space), obs_space, act_space)
                for act_space in ACTION_SPACES.values()
            ]
            lines.append(f"| {obs_name} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithms", nargs="*", help="default: every available one")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    print(markdown(args.algorithms or available_algorithms()))


if __name__ == "__main__":
    main()
