"""``corral evaluate`` (alias ``rollout``): rebuilds a trainer from a checkpoint and rolls
its policy out locally (the episodes themselves are ``corral.cli.rollout``'s).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from corral.cli.common import (
    EXIT_OK,
    UsageError,
    build_trainer,
    checkpoint_errors_as_usage,
    constructed,
    find_checkpoint_dir,
    get_trainer_class,
    json_object,
    positive_int,
)
from corral.cli.rollout import check_video_support, evaluate_episodes
from corral.utils import merge_dicts


def add_evaluate_parser(commands: Any) -> None:
    evaluate = commands.add_parser(
        "evaluate",
        aliases=["rollout"],
        help="roll out a checkpoint's policy",
        description="Run episodes with a trained checkpoint, like RLlib 1.x's `rllib evaluate`.",
    )
    evaluate.add_argument("checkpoint", help="checkpoint directory (or a file inside it)")
    evaluate.add_argument("--run", help="algorithm (default: the one that wrote the checkpoint)")
    evaluate.add_argument("--env", help="env (default: the one it was trained on)")
    evaluate.add_argument("--episodes", type=positive_int, default=10, help="default: 10")
    evaluate.add_argument(
        "--steps", type=positive_int, help="stop after this many env steps in all (default: none)"
    )
    evaluate.add_argument(
        "--policy",
        help="multi-agent checkpoints: the policy every agent acts with (default: the policy "
        "named like the agent, or the only one)",
    )
    display = evaluate.add_mutually_exclusive_group()
    display.add_argument("--render", action="store_true", help="show the env (render_mode human)")
    display.add_argument(
        "--no-render",
        dest="render",
        action="store_false",
        help="do not show the env (the default; RLlib 1.x's flag)",
    )
    display.add_argument("--video-dir", help="record each episode as mp4 here (needs moviepy)")
    evaluate.add_argument(
        "--out",
        metavar="DIR",
        help="write the episodes here with the offline writer (RLlib 1.x JSON files, "
        "readable by JsonReader and by an offline algorithm's `input`)",
    )
    evaluate.add_argument("--config", type=json_object, help="config overrides as a JSON object")
    evaluate.add_argument("--seed", type=int, help="seed of the first env reset and the trainer")
    evaluate.set_defaults(handler=run_evaluate, subparser=evaluate)


# Config keys whose value is code; params.json holds only their qualified name.
_CODE_VALUED_PATHS = (
    ("callbacks",),
    ("custom_eval_function",),
    ("env_task_fn",),
    ("multiagent", "policy_mapping_fn"),
    ("multiagent", "observation_fn"),
    ("multiagent", "policies_to_train"),
)


# `corral evaluate` steps the env itself: no remote workers (but the few an algorithm
# needs to be built, `Trainer.min_num_workers`), no evaluation of the trainer's own, and
# an env on the driver.
LOCAL_ROLLOUT = {
    "num_workers": 0,
    "evaluation_interval": None,
    "evaluation_num_workers": 0,
    "create_env_on_driver": True,
}


def local_rollout(trainer_class: Any) -> dict[str, Any]:
    """`LOCAL_ROLLOUT`, with the remote workers `trainer_class` cannot be built without."""
    return {**LOCAL_ROLLOUT, "num_workers": int(getattr(trainer_class, "min_num_workers", 0))}


def run_evaluate(args: argparse.Namespace) -> int:
    """``corral evaluate``: restores a checkpoint and prints each episode's reward and the mean.

    The trainer is :func:`rollout_trainer`'s: nothing the checkpoint's files name is
    imported.
    """
    if args.video_dir:
        check_video_support()
    writer = _out_writer(args.out)
    with rollout_trainer(
        args.checkpoint, args.run, args.env, args.config or {}, args.seed, args.policy
    ) as (trainer, env, config_env):
        try:
            rewards = evaluate_episodes(trainer, env, config_env, args, _recording(trainer, writer))
        finally:
            if writer is not None:
                writer.close()
    mean = sum(rewards) / len(rewards)
    print(f"Mean reward over {len(rewards)} episodes: {mean:.2f}")
    if args.out:
        print(f"Episodes written to {os.path.abspath(args.out)}")
    return EXIT_OK


@contextlib.contextmanager
def rollout_trainer(
    checkpoint: str | None,
    run: str | None,
    env: Any,
    overrides: Mapping,
    seed: int | None = None,
    policy: str | None = None,
) -> Iterator[tuple[Any, Any, Mapping]]:
    """A trainer set up for local rollouts (`LOCAL_ROLLOUT`), with its env and env_config.

    With a checkpoint, the trainer is rebuilt from the config the checkpoint stored
    (``Trainer.from_checkpoint``), or, for checkpoints older than that, from the
    trial's ``params.json``, and restored. Nothing either file names is imported: an
    env that is not registered in this process or a plain Gymnasium id must be given
    as ``env``, and config values that were code fall back to their defaults. Without
    a checkpoint (``None``) it is a new, untrained ``run`` trainer on ``env``.
    ``overrides`` (``--config``) go over the config; ``run`` (default: the algorithm
    that wrote the checkpoint), ``env`` (default: the one it was trained on), ``seed``
    and ``policy`` (``--policy``: see :func:`evaluation_mapping`) are the flags'.

    The trainer logs into a temporary folder and is stopped when the block ends.

    Raises:
        UsageError: a path that is not a checkpoint, no algorithm or env to use, a
            config or checkpoint the trainer cannot be built from.
    """
    from corral.tune.logger import UnifiedLogger
    from corral.utils import checkpoint_config
    from corral.utils.checkpoints import TRAINER_STATE, read_saved_config
    from corral.utils.error import CheckpointError

    params: dict = {}
    saved: Mapping | None = None
    saved_env: Any = None
    checkpoint_dir = ""
    if checkpoint is None:
        if not run:
            raise UsageError("--run (the algorithm) is needed without a checkpoint")
        trainer_class = get_trainer_class(run)
    else:
        checkpoint_dir = find_checkpoint_dir(checkpoint)
        try:
            name, saved = read_saved_config(checkpoint_dir)
            source = os.path.join(checkpoint_dir, TRAINER_STATE)
        except CheckpointError:  # written before checkpoints stored their config
            name, saved, source = _trainer_name(checkpoint_dir), None, ""
        trainer_class = get_trainer_class(run or name)
        if saved is None:
            params = read_params(checkpoint_dir)
            source = "the trial's params.json"
            saved_env = params.get("env")
            if saved_env is not None and not checkpoint_config.env_is_known(saved_env):
                saved_env = checkpoint_config.Unresolved(
                    "env", checkpoint_config.env_refusal(saved_env, source)
                )
        else:
            saved_env = saved.get("env")
    env = env or saved_env
    if isinstance(env, checkpoint_config.Unresolved):
        raise UsageError(f"{env.reason} with --env")
    if not env:
        if not checkpoint_dir:
            raise UsageError("--env is needed without a checkpoint")
        raise UsageError(f"no env is recorded for {checkpoint_dir}: give --env")
    with tempfile.TemporaryDirectory(prefix="corral-evaluate-") as logdir:
        # The trainer is only a policy holder here: log nowhere that outlives this command.
        def logger_creator(cfg: dict) -> Any:
            return UnifiedLogger(cfg, logdir, loggers=[])

        if saved is None:
            config = evaluation_config(params, trainer_class, overrides, seed)
            trainer = build_trainer(trainer_class, env, config, logger_creator)
            config_env = config.get("env_config") or {}
            if checkpoint_dir:
                try:
                    _restore(trainer, checkpoint_dir)
                except BaseException:
                    trainer.stop()
                    raise
        else:
            evaluation = evaluation_overrides(saved, trainer_class, overrides, seed, policy)
            evaluation["env"] = env
            trainer = _from_checkpoint(trainer_class, checkpoint_dir, evaluation, logger_creator)
            config_env = trainer.config.get("env_config") or {}
        try:
            yield trainer, env, config_env
        finally:
            trainer.stop()


def _out_writer(out_dir: str | None) -> Any:
    """``--out``'s writer (``None`` without it); a folder it cannot use is a usage error."""
    if not out_dir:
        return None
    from corral.cli.rollout_out import rollout_writer

    try:
        return rollout_writer(out_dir)
    except (OSError, ValueError) as e:
        raise UsageError(f"--out {out_dir!r}: {e}") from None


def _recording(trainer: Any, writer: Any) -> Callable[[Any], Any] | None:
    """``--out``: wraps the evaluation env so its episodes go to ``writer``."""
    if writer is None:
        return None
    from corral.cli.rollout_out import record_episodes

    mapping = trainer.config["multiagent"]["policy_mapping_fn"]
    return lambda env: record_episodes(env, writer, mapping)


def evaluation_overrides(
    saved: Mapping,
    trainer_class: Any,
    overrides: Mapping,
    seed: int | None,
    policy: str | None = None,
) -> dict:
    """``config_overrides`` that turn a checkpoint's saved config into one for local rollouts.

    Values the checkpoint could not give back (code) return to the algorithm's
    defaults; remote workers and the trainer's own evaluation are switched off
    (this command steps the env itself); the user's ``--config`` comes last.
    """
    from corral.utils import checkpoint_config

    defaults = trainer_class.get_default_config()
    out: dict = {}
    for missing in checkpoint_config.find_unresolved(saved):
        path = missing.key
        if path == "env" or path.startswith("multiagent.policies"):
            continue  # the env is passed separately; policies: see _single_agent_policies
        *parents, leaf = path.split(".")
        node = out
        for parent in parents:
            node = node.setdefault(parent, {})
        # evaluation_config overrides the main config: its lost values fall back to
        # the main config's defaults.
        default: Any = defaults
        for key in [*parents, leaf][1 if parents[:1] == ["evaluation_config"] else 0 :]:
            default = default.get(key) if isinstance(default, Mapping) else None
        node[leaf] = default
    policies = _saved_policies(saved.get("multiagent") or {})
    if policies is not None:
        out.setdefault("multiagent", {})["policies"] = policies
        if set(policies) != {"default_policy"}:
            out["multiagent"]["policy_mapping_fn"] = evaluation_mapping(list(policies), policy)
    out.update(local_rollout(trainer_class))
    if seed is not None:
        out["seed"] = seed
    return merge_dicts(out, overrides)


def _saved_policies(multiagent: Mapping) -> dict | None:
    """The saved policy specs, each class dropped where the checkpoint could not name it
    (the trainer's default policy class then stands in)."""
    from corral.utils import checkpoint_config

    policies = multiagent.get("policies")
    if not isinstance(policies, Mapping) or not policies:
        return None
    out = {}
    for policy_id, spec in policies.items():
        spec = list(spec) if isinstance(spec, list | tuple) else [None, None, None, {}]
        if checkpoint_config.find_unresolved(spec[:1]):
            spec[0] = None
        if checkpoint_config.find_unresolved(spec):
            raise UsageError(f"the saved spec of policy {policy_id!r} cannot be rebuilt: {spec}")
        out[policy_id] = spec
    return out


def evaluation_mapping(policy_ids: list[str], chosen: str | None) -> Callable[..., str]:
    """The ``policy_mapping_fn`` of a multi-agent rollout (the trained one was code, which
    checkpoints do not store): ``chosen`` for every agent, else the policy named like the
    agent, else the only policy."""
    if chosen is not None and chosen not in policy_ids:
        raise UsageError(f"--policy {chosen!r}: the checkpoint's policies are {policy_ids}")

    def mapping(agent_id: Any, *args: Any, **kwargs: Any) -> str:
        if chosen is not None:
            return chosen
        if str(agent_id) in policy_ids:
            return str(agent_id)
        if len(policy_ids) == 1:
            return policy_ids[0]
        raise UsageError(
            f"agent {agent_id!r} has no policy of its name among {policy_ids}: "
            "pick one with --policy"
        )

    return mapping


def _from_checkpoint(
    trainer_class: Any, checkpoint_dir: str, overrides: dict, logger_creator: Callable
) -> Any:
    """``trainer_class.from_checkpoint``, its mistakes reported as one-line usage errors."""
    with checkpoint_errors_as_usage():
        return constructed(
            trainer_class,
            lambda: trainer_class.from_checkpoint(
                checkpoint_dir, overrides, logger_creator=logger_creator
            ),
        )


def read_json_object(path: str, what: str) -> dict:
    """The JSON object in ``path``; a missing or bad file is a ``UsageError`` naming it."""
    from corral.utils import checkpoints

    with checkpoint_errors_as_usage():
        return checkpoints.read_json_object(path, what)


def read_params(checkpoint_dir: str) -> dict:
    """The trial's ``params.json`` (in the checkpoint's folder or its parent), or ``{}``."""
    from corral.tune.result import EXPR_PARAM_FILE

    for folder in (checkpoint_dir, os.path.dirname(checkpoint_dir)):
        path = os.path.join(folder, EXPR_PARAM_FILE)
        if os.path.isfile(path):
            return read_json_object(path, "the trial's config")
    return {}


def _trainer_name(checkpoint_dir: str) -> str:
    from corral.utils.checkpoints import TRAINER_STATE

    state = read_json_object(os.path.join(checkpoint_dir, TRAINER_STATE), "the trainer state")
    name = state.get("trainer")
    if not isinstance(name, str):
        raise UsageError(f"{checkpoint_dir}/{TRAINER_STATE} names no 'trainer': give --run")
    return name


def evaluation_config(
    params: Mapping, trainer_class: Any, overrides: Mapping, seed: int | None
) -> dict:
    """The trained config, made loadable and set up for a single local rollout.

    ``params.json`` stores classes and functions as qualified-name strings; a
    trainer cannot call those, so such keys fall back to their defaults.
    Remote workers and the trainer's own evaluation are switched off: this
    command steps the env itself.
    """
    config = usable_params(params, trainer_class.get_default_config())
    config = merge_dicts(config, overrides)
    config.update(local_rollout(trainer_class))
    if seed is not None:
        config["seed"] = seed
    return config


def usable_params(params: Mapping, defaults: Mapping) -> dict:
    """``params`` without the values JSON could not keep (code stored as its name)."""
    from corral.utils.deprecation import DEPRECATED_VALUE

    config = copy.deepcopy({k: v for k, v in params.items() if k != "env"})
    for key, default in defaults.items():
        if callable(default) and isinstance(config.get(key), str):
            del config[key]
        elif type(default) is int and default == DEPRECATED_VALUE and key in config:
            # The trainer already moved a deprecated key's value to its successor;
            # passing the resolved value back would only trigger the warning again.
            del config[key]
    for *parents, key in _CODE_VALUED_PATHS:
        node: Any = config
        for parent in parents:
            node = node.get(parent) if isinstance(node, dict) else None
        if isinstance(node, dict) and isinstance(node.get(key), str):
            del node[key]
    # Only the trainer's own evaluation reads it, and that is switched off.
    config.pop("evaluation_config", None)
    _reset_policy_specs(config)
    return config


def _reset_policy_specs(config: dict) -> None:
    """Single-agent only: the policy's class and spaces come from the trainer and the env.

    A stored spec holds the class as a name and the spaces as their repr;
    neither can be rebuilt, and multi-agent rollouts would also need the
    (lost) ``policy_mapping_fn``.
    """
    multiagent = config.get("multiagent")
    if not isinstance(multiagent, dict) or not isinstance(multiagent.get("policies"), dict):
        return
    policies = multiagent["policies"]
    if set(policies) != {"default_policy"}:
        raise UsageError(
            f"the checkpoint has policies {sorted(policies)}; `corral evaluate` rolls out "
            "single-agent checkpoints (the default_policy) only"
        )
    spec = policies["default_policy"]
    policy_config = spec[3] if isinstance(spec, list) and len(spec) == 4 else None
    multiagent["policies"] = {"default_policy": [None, None, None, policy_config or {}]}


def _restore(trainer: Any, checkpoint_dir: str) -> None:
    with checkpoint_errors_as_usage():
        trainer.restore(checkpoint_dir)
