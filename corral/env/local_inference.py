"""Local inference for `PolicyClient` (RLlib 1.13's default, ``inference_mode="local"``),
built so that nothing the server sends is run as code.

The client asks the server to describe its rollout worker (``GET_WORKER_ARGS``), builds a
rollout worker of its own around an external env whose `get_action` the client's policy
answers, and runs a thread that samples that worker and sends each batch, with the
finished episodes' metrics, to the server (``REPORT_SAMPLES``): the server's `next()`
hands it to the trainer. The client pulls the trainer's weights (``GET_WEIGHTS``, numpy
arrays) when it is built and then every `update_interval` seconds.

RLlib sends the worker's constructor arguments as a pickle. corral's description is JSON
data only (`worker_args`):

* each policy's class as the name of a registered algorithm (corral's, preferred since
  every client has them, or one the script registered with `tune.register_trainable`),
  looked up in the algorithm registry, whose default policy class it is, with that
  class's qualified name. The client builds the policy only when the algorithm of that
  name, *registered on the client*, has exactly that default policy class;
* the config's data (numbers, strings, lists, dicts; spaces as `corral.utils.spaces_json`
  describes them). Code in the config (classes, functions) travels as its name only, and
  the client never resolves such a name: what it needs of it comes from the client script
  (`config_overrides`, e.g. a multi-agent `policy_mapping_fn`), and a ``custom_model``
  (``custom_action_dist``, ``custom_preprocessor``) must be a name the client script
  registered with `ModelCatalog`. The server's `callbacks` do not run on the client unless
  the client script passes them;
* the spaces of the env and of each policy, the policy ids, and whether the env is
  multi-agent.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from corral.env.external_env import ExternalEnvStopped
from corral.env.serving_wire import Commands, batch_to_wire, metrics_to_wire
from corral.utils.checkpoint_config import (
    _CLASS,
    _FUNCTION,
    _OPAQUE,
    _SPACE,
    _TUPLE,
    config_to_json,
    qualified_name,
)
from corral.utils.error import EnvError
from corral.utils.spaces_json import space_from_json, space_to_json

logger = logging.getLogger(__name__)

# The version of the worker description below (a client refuses any other).
WORKER_ARGS_VERSION = 1

# The settings a local-inference client's worker always has, whatever the server's: it
# samples its own external env, once, in this process, on the CPU, and writes nothing.
LOCAL_SETTINGS: dict[str, Any] = {
    "env": None,
    "input": "sampler",
    "input_config": {},
    "input_evaluation": [],
    "output": None,
    "output_config": {},
    "num_workers": 0,
    "num_envs_per_worker": 1,
    "create_env_on_driver": True,
    "remote_worker_envs": False,
    "restart_failed_sub_environments": False,
    "vectorize_mode": "sequential",
    "render_env": False,
    "record_env": False,
    "sample_async": False,
    "compress_observations": False,
    "fake_sampler": False,
    "in_evaluation": False,
    "num_gpus": 0,
    "num_gpus_per_worker": 0,
    "_fake_gpus": False,
    "extra_python_environs_for_driver": {},
    "extra_python_environs_for_worker": {},
}

# Config entries whose code the client does without: it sets them itself (`LOCAL_SETTINGS`,
# default callbacks) or never reads them (training, evaluation, logging).
_CLIENT_DOES_WITHOUT = (
    "callbacks",
    "env",
    "input",
    "output",
    "env_task_fn",
    "custom_eval_function",
    "logger_config",
    "evaluation_config",
    "replay_buffer_config",
    "multiagent.policies_to_train",
)

_DEFAULT_CALLBACKS = "corral.agents.callbacks:DefaultCallbacks"
# Keys a policy's own config entries may not change on the client (the worker's).
_NOT_PER_POLICY = frozenset(LOCAL_SETTINGS) | {"callbacks", "multiagent"}


# -- the server's side ---------------------------------------------------------------


def worker_args(
    worker: Any, observation_space: Any, action_space: Any, multi_agent: bool
) -> dict[str, Any]:
    """The description of `worker` a local-inference client builds its own worker from
    (JSON data; see the module doc).

    Args:
        worker: the server's rollout worker (the trainer's).
        observation_space: the served env's observation space.
        action_space: the served env's action space.
        multi_agent: whether the served env is multi-agent (dicts by agent id).

    Raises:
        ValueError: a policy's class is no registered algorithm's default policy class,
            or a space cannot be described as JSON.
    """
    base = config_to_json(_without_policies(worker.config))
    code: dict[str, str] = {}
    config = _split_code(base, "", code)
    policies = {}
    for pid in worker.policy_map:
        policy = worker.policy_map[pid]
        cls = type(policy)
        algorithm = algorithm_name(cls, worker.config)
        if algorithm is None:
            raise ValueError(
                f"Policy {pid!r} is a {qualified_name(cls)}, which is no registered "
                "algorithm's default policy class: a local-inference client cannot name it "
                "(register a trainer whose default policy it is with tune.register_trainable "
                "in both scripts, or use PolicyClient(inference_mode='remote'))."
            )
        # The policy's own config entries (its spec's overrides, its class's defaults).
        own = config_to_json(_without_policies(policy.config))
        changed = {
            k: v for k, v in own.items() if k != "worker_index" and base.get(k, _MISSING) != v
        }
        policy_code: dict[str, str] = {}
        obs_space, act_space = worker.policy_map.spaces(pid)
        policies[str(pid)] = {
            "algorithm": algorithm,
            "policy_class": qualified_name(cls),
            "observation_space": _space_json(obs_space, f"policy {pid!r}'s observation space"),
            "action_space": _space_json(act_space, f"policy {pid!r}'s action space"),
            "config": _split_code(changed, "", policy_code),
            "code": policy_code,
        }
    return {
        "version": WORKER_ARGS_VERSION,
        "multi_agent": bool(multi_agent),
        "observation_space": _space_json(observation_space, "the observation space"),
        "action_space": _space_json(action_space, "the action space"),
        "config": config,
        "code": code,
        "policies": policies,
    }


_MISSING = object()
_DROPPED = object()


def _without_policies(config: Mapping[str, Any]) -> dict[str, Any]:
    """`config` without `multiagent.policies` (sent as the policies' own entries)."""
    multiagent = {k: v for k, v in (config.get("multiagent") or {}).items() if k != "policies"}
    return {**config, "multiagent": multiagent}


def _split_code(node: Any, path: str, code: dict[str, str]) -> Any:
    """`node` (from `config_to_json`) without its code markers, which go to `code` as
    path -> name."""
    if isinstance(node, dict):
        if len(node) == 1:
            ((key, value),) = node.items()
            if key in (_CLASS, _FUNCTION, _OPAQUE):
                code[path] = str(value)
                return _DROPPED
        out = {}
        for key, value in node.items():
            kept = _split_code(value, f"{path}.{key}" if path else key, code)
            if kept is not _DROPPED:
                out[key] = kept
        return out
    if isinstance(node, list):
        items = [_split_code(v, f"{path}[{i}]", code) for i, v in enumerate(node)]
        return [None if v is _DROPPED else v for v in items]
    return node


def _space_json(space: Any, what: str) -> dict[str, Any]:
    try:
        return space_to_json(space)
    except TypeError as error:
        raise ValueError(f"Local inference cannot describe {what} as JSON: {error}") from None


def default_policy_class(trainer_cls: type, config: Mapping[str, Any]) -> type | None:
    """`trainer_cls`'s default policy class for `config`, without building a trainer
    (None where it cannot say)."""
    try:
        bare: Any = object.__new__(trainer_cls)
        return trainer_cls.get_default_policy_class(bare, config)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - another algorithm's method on this config
        return None


def algorithm_name(policy_cls: type, config: Mapping[str, Any]) -> str | None:
    """The registry name of an algorithm whose default policy class for `config` is
    `policy_cls` (None: none is), looked up in the algorithm registry
    (`corral.agents.registry.loaded_trainer_classes`): corral's own algorithms first,
    which every client has, then those the script registered with
    `tune.register_trainable`. Only algorithms already imported are asked."""
    from corral.agents.registry import loaded_trainer_classes
    from corral.agents.trainer import Trainer

    for name, trainer_cls in loaded_trainer_classes():
        if not (isinstance(trainer_cls, type) and issubclass(trainer_cls, Trainer)):
            continue
        if default_policy_class(trainer_cls, config) is policy_cls:
            return name
    return None


# -- the client's side ---------------------------------------------------------------


def _refused(reason: str) -> EnvError:
    return EnvError(f"Local inference refuses the policy server's worker description: {reason}")


def _decode_data(node: Any, path: str) -> Any:
    """JSON config data as the client uses it: spaces and tuples rebuilt; any other
    marker (a class, a function) refused."""
    if isinstance(node, list):
        return [_decode_data(v, f"{path}[{i}]") for i, v in enumerate(node)]
    if not isinstance(node, dict):
        return node
    if len(node) == 1 and isinstance(next(iter(node)), str) and next(iter(node)).startswith("__"):
        key, value = next(iter(node.items()))
        if key == _SPACE:
            return _space(value, path)
        if key == _TUPLE and isinstance(value, list):
            return tuple(_decode_data(v, f"{path}[{i}]") for i, v in enumerate(value))
        raise _refused(f"{path or 'the config'} holds {key!r}, which is not config data.")
    out = {}
    for key, value in node.items():
        if not isinstance(key, str):
            raise _refused(f"{path or 'the config'} has the key {key!r}, not a string.")
        out[key] = _decode_data(value, f"{path}.{key}" if path else key)
    return out


def _space(data: Any, what: str) -> Any:
    try:
        return space_from_json(data)
    except (KeyError, ValueError, TypeError) as error:
        raise _refused(f"{what} is not a space description ({error}).") from None


def _has_path(overrides: Mapping[str, Any], path: str) -> bool:
    node: Any = overrides
    for part in path.split("."):
        if not isinstance(node, Mapping) or part.split("[")[0] not in node:
            return False
        node = node[part.split("[")[0]]
    return True


def _code_dict(value: Any, what: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise _refused(f"{what} must be an object of config path -> name.")
    return {k: str(v)[:200] for k, v in value.items()}


def _check_code(
    code: dict[str, str], overrides: Mapping[str, Any], single_default: bool, where: str
) -> None:
    """Refuses code entries the client needs and its script did not give."""
    missing = {}
    for path, name in code.items():
        if _has_path(overrides, path):
            continue
        does_without = any(
            path == key or path.startswith((f"{key}.", f"{key}[")) for key in _CLIENT_DOES_WITHOUT
        )
        if path == "multiagent.policy_mapping_fn" and single_default:
            does_without = True
        if path == "callbacks" and name != _DEFAULT_CALLBACKS:
            logger.warning(
                "The policy server's callbacks (%s) do not run in this local-inference client "
                "(code never travels); pass them as PolicyClient(..., config_overrides="
                "{'callbacks': ...}) for client-side episode hooks and custom metrics.",
                name,
            )
        if not does_without:
            missing[path] = name
    if not missing:
        return
    lines = "\n".join(f"  {path} = {name}" for path, name in missing.items())
    hint = ""
    if any(path.startswith("model.") for path in missing):
        hint = (
            "\nA model class must be registered by name on both sides: "
            "ModelCatalog.register_custom_model('MyModel', MyModel) in the server and the "
            "client scripts, and the server's config names it (custom_model='MyModel')."
        )
    raise EnvError(
        f"The policy server's config ({where}) holds code, which corral never takes over "
        f"the network:\n{lines}\nGive these from the client script: PolicyClient(address, "
        "inference_mode='local', config_overrides={...}) with the same keys (e.g. "
        "{'multiagent': {'policy_mapping_fn': fn}}), or use inference_mode='remote'." + hint
    )


def _check_names(config: Mapping[str, Any], pid: str) -> None:
    """Refuses model and exploration names the client has not registered (or that would
    be imported: dotted paths)."""
    from corral.models.catalog import _CUSTOM_ACTION_DISTS, _CUSTOM_MODELS
    from corral.models.preprocessors import _CUSTOM_PREPROCESSORS

    model = config.get("model") or {}
    named = (
        ("custom_model", _CUSTOM_MODELS, "register_custom_model"),
        ("custom_action_dist", _CUSTOM_ACTION_DISTS, "register_custom_action_dist"),
        ("custom_preprocessor", _CUSTOM_PREPROCESSORS, "register_custom_preprocessor"),
    )
    for key, registry, register in named:
        name = model.get(key)
        if isinstance(name, str) and name and name not in registry:
            raise EnvError(
                f"The policy server's policy {pid!r} uses {key} {name!r}, which this client "
                f"has not registered. Call ModelCatalog.{register}({name!r}, YourClass) in the "
                "client script before PolicyClient(..., inference_mode='local'): corral "
                "builds only models registered on the client, never code the server sends."
            )
    for path, kind in _exploration_types(config.get("exploration_config"), "exploration_config"):
        if isinstance(kind, str) and ("." in kind or ":" in kind):
            raise EnvError(
                f"The policy server's policy {pid!r} names the exploration class {kind!r} by "
                f"import path ({path}); a local-inference client never imports what the server "
                "names: pass the class from the client script, PolicyClient(..., "
                "config_overrides={'exploration_config': {'type': YourExploration}})."
            )


def _exploration_types(node: Any, path: str) -> list[tuple[str, Any]]:
    if isinstance(node, Mapping):
        found = [(f"{path}.type", node["type"])] if "type" in node else []
        for key, value in node.items():
            found += _exploration_types(value, f"{path}.{key}")
        return found
    if isinstance(node, list | tuple):
        return [t for i, v in enumerate(node) for t in _exploration_types(v, f"{path}[{i}]")]
    return []


def resolve_policy_class(
    algorithm: Any, class_name: Any, config: Mapping[str, Any], pid: str
) -> type:
    """The client's policy class for the server's policy `pid`: the default policy class
    of `algorithm` as registered on this client, when its qualified name is `class_name`.

    Raises:
        EnvError: the algorithm is not registered here, or its default policy class here
            is another one.
    """
    from corral.agents.registry import get_trainer_class
    from corral.agents.trainer import Trainer

    if not isinstance(algorithm, str) or not isinstance(class_name, str):
        raise _refused(f"policy {pid!r} must name its algorithm and policy class as strings.")
    try:
        trainer_cls = get_trainer_class(algorithm)
    except (ValueError, NotImplementedError) as error:
        raise EnvError(
            f"The policy server's policy {pid!r} names the algorithm {algorithm[:100]!r}, "
            f"which is not registered on this client ({error}). Local inference builds only "
            "the default policy class of an algorithm registered here (corral's, or one the "
            "client script registers with tune.register_trainable)."
        ) from None
    if not (isinstance(trainer_cls, type) and issubclass(trainer_cls, Trainer)):
        raise EnvError(
            f"The policy server's policy {pid!r} names {algorithm!r}, which is registered on "
            "this client but is not a Trainer: local inference refuses it."
        )
    cls = default_policy_class(trainer_cls, config)
    if cls is None or qualified_name(cls) != class_name:
        here = qualified_name(cls) if cls is not None else "none"
        raise EnvError(
            f"The policy server's policy {pid!r} is a {class_name[:200]}, but algorithm "
            f"{algorithm!r}'s default policy class on this client is {here}: local inference "
            "refuses to build it (the same algorithm must be registered on both sides)."
        )
    return cls


def build_local_worker(
    args: Any, config_overrides: Mapping[str, Any] | None = None
) -> tuple[Any, Any]:
    """The client's rollout worker built from the server's description `args`, and its
    external env (whose `run()` waits until `closing` is set).

    Args:
        args: what `worker_args` returned on the server.
        config_overrides: config entries from the client script (code the server could
            not send: `policy_mapping_fn`, `callbacks`, an exploration class, ...);
            nested dicts merge.

    Raises:
        EnvError: the description is malformed, names an unregistered algorithm or a
            class the client does not have, or needs code the client script did not give.
    """
    from corral.agents.callbacks import DefaultCallbacks
    from corral.env.policy_server_input import served_env
    from corral.evaluation.policy_setup import merge_policy_config
    from corral.evaluation.rollout_worker import RolloutWorker
    from corral.policy.policy import PolicySpec
    from corral.policy.sample_batch import DEFAULT_POLICY_ID
    from corral.utils.checkpoint_config import apply_overrides

    if not isinstance(args, dict) or args.get("version") != WORKER_ARGS_VERSION:
        raise _refused(
            f"expected an object with version={WORKER_ARGS_VERSION} (corral's "
            "PolicyServerInput), got "
            + (f"version {args.get('version')!r}" if isinstance(args, dict) else repr(args)[:80])
        )
    overrides = dict(config_overrides or {})
    policies = args.get("policies")
    if not isinstance(policies, dict) or not policies:
        raise _refused("it names no policies.")
    single_default = list(policies) == [DEFAULT_POLICY_ID]
    config = _decode_data(args.get("config"), "")
    if not isinstance(config, dict):
        raise _refused("its config must be an object.")
    _check_code(_code_dict(args.get("code", {}), "code"), overrides, single_default, "config")
    config.update(LOCAL_SETTINGS, callbacks=DefaultCallbacks)
    multiagent = dict(config.get("multiagent") or {})
    multiagent.update(policy_map_cache=None, policies={})
    config["multiagent"] = multiagent
    config = apply_overrides(config, overrides)
    specs = {}
    for pid, entry in policies.items():
        if not isinstance(pid, str) or not isinstance(entry, dict):
            raise _refused(f"policy {pid!r} must be an object under a string id.")
        own = _decode_data(entry.get("config", {}), f"policies.{pid}.config")
        if not isinstance(own, dict):
            raise _refused(f"policy {pid!r}'s config must be an object.")
        own = {k: v for k, v in own.items() if k not in _NOT_PER_POLICY}
        code = _code_dict(entry.get("code", {}), f"policy {pid!r}'s code")
        _check_code(code, overrides, single_default, f"policy {pid!r}")
        cls = resolve_policy_class(entry.get("algorithm"), entry.get("policy_class"), config, pid)
        _check_names(merge_policy_config(config, own), pid)
        obs_space = _space(entry.get("observation_space"), f"policy {pid!r}'s observation space")
        act_space = _space(entry.get("action_space"), f"policy {pid!r}'s action space")
        specs[pid] = PolicySpec(cls, obs_space, act_space, own)
    env = served_env(
        bool(args.get("multi_agent")),
        _space(args.get("action_space"), "the action space"),
        _space(args.get("observation_space"), "the observation space"),
    )
    try:
        worker = RolloutWorker(
            env_creator=lambda ctx: env,
            policy_specs=specs,
            config=config,
            worker_index=0,
            num_workers=0,
        )
    except Exception as error:
        env.closing.set()
        raise EnvError(
            "Local inference could not build its rollout worker from the policy server's "
            f"description: {type(error).__name__}: {error}"
        ) from error
    return worker, env


class LocalInference:
    """A local-inference client's worker, its sampling thread and its weight pulls.

    Args:
        send: sends a message to the server and returns the reply (raises `EnvError`).
        update_interval: seconds between weight pulls (None or 0: only on
            `update_weights(force=True)`).
        config_overrides: see `build_local_worker`.

    Raises:
        EnvError: the server's description is refused, or the server is unreachable.
    """

    def __init__(
        self,
        send: Callable[[dict[str, Any]], dict[str, Any]],
        update_interval: float | None,
        config_overrides: Mapping[str, Any] | None = None,
    ) -> None:
        self._send = send
        self.update_interval = update_interval
        self.last_updated = 0.0
        self.error: BaseException | None = None
        self._closed = threading.Event()
        self._update_lock = threading.Lock()
        reply = send({"command": Commands.GET_WORKER_ARGS})
        self.worker, self.env = build_local_worker(reply.get("worker_args"), config_overrides)
        try:
            self.update_weights(force=True)
        except BaseException:
            self._stop_worker()
            raise
        self.thread = threading.Thread(
            target=self._sample_forever, name="policy-client-sampler", daemon=True
        )
        self.thread.start()

    def check(self) -> None:
        """Raises `EnvError` when the sampling thread has stopped (naming why)."""
        if self.error is not None:
            raise EnvError(
                f"The local-inference client stopped: {type(self.error).__name__}: {self.error}"
            ) from self.error
        if self._closed.is_set():
            raise EnvError("The local-inference client is closed.")

    def call(self, method: str, *args: Any) -> Any:
        """`self.env.<method>(*args)` after a due weight pull; a stopped worker raises
        `EnvError` (not the env's quiet `ExternalEnvStopped`)."""
        self.update_weights()
        try:
            return getattr(self.env, method)(*args)
        except ExternalEnvStopped:
            self.check()
            raise EnvError("The local-inference client stopped.") from None

    def update_weights(self, force: bool = False) -> None:
        """Pulls the trainer's weights when `update_interval` has passed (or `force`)."""
        self.check()
        with self._update_lock:
            due = self.update_interval and (
                time.monotonic() - self.last_updated > self.update_interval
            )
            if not (force or due):
                return
            reply = self._send({"command": Commands.GET_WEIGHTS})
            weights, global_vars = reply.get("weights"), reply.get("global_vars") or {}
            if not isinstance(weights, dict) or not isinstance(global_vars, dict):
                raise EnvError("The policy server's weights reply is malformed.")
            unknown = sorted(str(p) for p in weights if p not in self.worker.policy_map)
            if unknown:
                raise EnvError(f"The policy server sent weights of unknown policies {unknown}.")
            try:
                self.worker.set_weights(weights, global_vars)
            except Exception as error:
                raise EnvError(
                    "The policy server's weights do not fit the client's policies "
                    f"({type(error).__name__}: {error})."
                ) from error
            self.last_updated = time.monotonic()

    def close(self) -> None:
        """Stops the sampling thread (episodes still running are not reported) and the
        worker; a later call raises `EnvError`."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._stop_worker()
        if self.thread is not threading.current_thread():
            self.thread.join(timeout=30.0)

    def _stop_worker(self) -> None:
        self.env.closing.set()  # `run()` returns: the sampler's wait ends
        self.worker.stop()  # waiting (and later) requests for actions end

    def _sample_forever(self) -> None:
        try:
            while not self._closed.is_set():
                batch = self.worker.sample()
                if self._closed.is_set():
                    return
                message = {
                    "command": Commands.REPORT_SAMPLES,
                    "samples": batch_to_wire(batch),
                    "metrics": metrics_to_wire(self.worker.get_metrics()),
                }
                self._send(message)
        except Exception as error:  # noqa: BLE001 - kept, raised by the client's next call
            if not self._closed.is_set():
                self.error = error
                logger.error("The local-inference client's sampler stopped: %s", error)
                self.env.stop_episodes()  # episodes waiting for actions end now
