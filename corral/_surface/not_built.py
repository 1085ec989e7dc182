"""The one registry of what corral does not build.

- :data:`NOT_BUILT`: RLlib algorithms and features corral lacks; their names import and
  raise on use (:mod:`corral._surface`), `corral.agents.registry` answers "not built yet" for
  their algorithms;
- :data:`NOT_BUILT_SETTINGS`: config keys whose other values are not built; a trainer
  refuses them by name when it is built (`corral.agents.config.check_not_implemented`).

README.md's list (``scripts/update_readme_surface.py``) and docs/not-built.md
(``scripts/gen_docs.py``) are generated from these tables.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Feature:
    """An RLlib algorithm or feature corral does not build.

    Args:
        name: what users call it ("IMPALA").
        what: one line on what it is.
        modules: module paths (relative to ``corral``) that belong wholly to it.
        names: single names ``"module:Name"`` that belong to it.
        algorithms: its ``get_trainer_class`` names.
    """

    name: str
    what: str
    modules: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    algorithms: tuple[str, ...] = ()


# What corral does not build. README.md's list, docs/not-built.md and `corral.agents.registry`
# read this.
NOT_BUILT: tuple[Feature, ...] = (
    Feature(
        "RLlib's multi-GPU tower optimizer",
        "`multi_gpu_impl.LocalSyncParallelOptimizer`, TensorFlow's per-GPU towers (corral's "
        "learners train on one device each, several with `num_learners`); the multi-GPU "
        "learner thread, tree aggregation, Ape-X's learner thread and replay actors, and "
        "execution plans with their operators are built (`corral.execution`)",
        ("execution.multi_gpu_impl",),
    ),
    Feature(
        "Third-party env wrappers",
        "the Unity3D and Kaggle football wrappers (the DeepMind, dm_control, OpenSpiel and "
        "RecSim ones are built): Unity3D drives a Unity game build over ML-Agents' "
        "socket, which no package ships; Google Research Football (`gfootball`, last "
        "released 2022) compiles its C++ game engine at install. RecSim's own simulator "
        "(`recsim`, last released 2020) needs TensorFlow: `make_recsim_env`, which builds "
        "envs from its models, makes envs that raise naming it (corral's RecSim-layout env "
        "is `RecSysInterestEvolution-v0`)",
        (
            "env.wrappers.kaggle_wrapper",
            "env.wrappers.unity3d_env",
        ),
    ),
    Feature(
        "Tune's third-party searchers",
        "Ray Tune 1.13's wrappers of optimisation libraries other than Optuna, HyperOpt, "
        "scikit-optimize, Nevergrad, BayesianOptimization, ZOOpt, FLAML and Ax (`TuneBOHB` "
        "with its scheduler `HyperBandForBOHB`, `DragonflySearch`, `HEBOSearch`, "
        "`SigOptSearch`: hpbandster and dragonfly-opt ship no wheels, HEBO's install did not "
        "resolve, SigOpt is a web service); `corral.tune.suggest` builds `OptunaSearch`, "
        "`HyperOptSearch`, `SkOptSearch`, `NevergradSearch`, `BayesOptSearch`, `ZOOptSearch`, "
        "`BlendSearch`, `CFO` and `AxSearch` (the `optuna`, `hyperopt`, `skopt`, `nevergrad`, "
        "`bayesopt`, `zoopt`, `flaml` and `ax` extras), the `Searcher` API, "
        "`ConcurrencyLimiter`, `Repeater` and `BasicVariantGenerator`: subclass `Searcher` to "
        "drive one of the others",
        (
            "tune.suggest.bohb",
            "tune.suggest.dragonfly",
            "tune.suggest.hebo",
            "tune.suggest.sigopt",
        ),
    ),
)


@dataclass(frozen=True, slots=True)
class Setting:
    """A config setting whose other values corral does not build.

    Setting it away from its default (the algorithm's `DEFAULT_CONFIG`, else
    `COMMON_CONFIG`) raises `NotImplementedError` when the trainer is built
    (`corral.agents.config.check_not_implemented`) instead of being ignored.

    Args:
        path: the key, nested keys joined by "/" ("model/custom_preprocessor").
        what: what corral lacks, in a few words.
        algorithms: the algorithms whose `DEFAULT_CONFIG` has the key, the only ones it
            is checked for; () for a key of `COMMON_CONFIG` (checked for every trainer).
        allowed: the values that are built, whatever an algorithm's defaults say (the
            first is the default named in the error); () means the default alone.
    """

    path: str
    what: str
    algorithms: tuple[str, ...] = ()
    allowed: tuple[object, ...] = ()


_OFF_POLICY = ("SimpleQ", "DQN", "APEX", "R2D2", "SAC", "DDPG", "TD3", "APEX_DDPG", "SlateQ")
# The algorithms whose policies build their own models on the flattened observations.
_OWN_MODELS = (
    *_OFF_POLICY,
    "RNNSAC",
    "QMIX",
    "CQL",
    "CQL_DQN",
    "ES",
    "ARS",
    "BanditLinUCB",
    "BanditLinTS",
)

# Config settings corral accepts for compatibility but does not build. Remove an entry when
# the feature lands.
NOT_BUILT_SETTINGS: tuple[Setting, ...] = (
    Setting("eager_tracing", "TensorFlow eager tracing (corral is torch-only)"),
    Setting(
        "_disable_preprocessor_api",
        "unpreprocessed observations for the models these algorithms build themselves "
        "(built where the catalog makes the model: PPO, APPO, IMPALA, PG, A2C/A3C, "
        "MARWIL/BC)",
        _OWN_MODELS,
    ),
    Setting(
        "model/custom_preprocessor",
        "a custom preprocessor for QMIX (it reads each agent's part of the default "
        "flattened group observation)",
        ("QMIX",),
    ),
    Setting(
        "_disable_action_flattening",
        "nested group actions for QMIX (its mixer reads the group's actions as flat rows)",
        ("QMIX",),
    ),
    # Algorithms' own keys.
    Setting(
        "worker_side_prioritization",
        "priorities computed in the workers for replayed sequences (R2D2 and RNNSAC "
        "prioritize whole sequences by the learner's TD errors)",
        ("R2D2", "RNNSAC"),
    ),
    Setting(
        "replay_buffer_shards_colocated_with_driver",
        "replay buffer shards away from the driver (Ape-X's buffer is one buffer in the "
        "driver process)",
        ("APEX", "APEX_DDPG"),
    ),
    Setting(
        "replay_buffer_config/type",
        "other replay buffer classes (a MultiAgentReplayBuffer; prioritized with "
        "`prioritized_replay: True` or the type MultiAgentPrioritizedReplayBuffer)",
        _OFF_POLICY,
        ("MultiAgentReplayBuffer", "MultiAgentPrioritizedReplayBuffer"),
    ),
    Setting(
        "_use_beta_distribution",
        "a Beta action distribution (built for SAC)",
        ("RNNSAC", "CQL"),
    ),
    Setting(
        "n_step",
        "n-step returns for SlateQ (its loss reads the response to each transition's slate)",
        ("SlateQ",),
    ),
)


def common_settings() -> dict[str, str]:
    """Path -> what, for the not-built settings of `COMMON_CONFIG` (RLlib-era
    `NOT_YET_IMPLEMENTED`)."""
    return {s.path: s.what for s in NOT_BUILT_SETTINGS if not s.algorithms}


def not_built_algorithms() -> dict[str, Feature]:
    """``get_trainer_class`` names of algorithms corral does not build -> their feature."""
    return {algo: f for f in NOT_BUILT for algo in f.algorithms}


def markdown_not_built() -> str:
    """The README's list of what corral does not build (generated from :data:`NOT_BUILT`)."""
    lines = []
    for feature in NOT_BUILT:
        algos = f" (`{'`, `'.join(feature.algorithms)}`)" if feature.algorithms else ""
        where = f" (`corral.{feature.modules[0]}`)" if feature.modules else ""
        lines.append(f"- **{feature.name}**{algos}: {feature.what}{where}")
    lines.append(
        "- TensorFlow and JAX: every `*TFPolicy`, `TFModelV2`, `models.tf.*`, `models.jax.*` and "
        "`tf_utils` name imports, and raises `TensorFlowOnlyError` naming its torch counterpart."
    )
    lines.append(
        "- Single RLlib helpers of modules corral builds (mostly the functions RLlib's "
        "function-built policies are made of; corral's policies are classes), listed with the "
        "reason in `corral/_surface/names.py` (`_NOT_PROVIDED`)."
    )
    return "\n".join(lines)


def markdown_not_built_settings() -> str:
    """The list of config settings whose other values are not built (:data:`NOT_BUILT_SETTINGS`)."""
    lines = []
    for s in NOT_BUILT_SETTINGS:
        key = "`" + s.path.replace("/", ".") + "`"
        scope = f" ({', '.join(s.algorithms)})" if s.algorithms else ""
        only = f"; built: {', '.join(f'`{v!r}`' for v in s.allowed)}" if s.allowed else ""
        lines.append(f"- {key}{scope}: {s.what}{only}")
    return "\n".join(lines)
