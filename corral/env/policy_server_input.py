"""`PolicyServerInput`: a trainer's input served over HTTP to `PolicyClient`s (RLlib
1.13's policy serving).

Give it as the trainer's input (``"input": lambda ioctx: PolicyServerInput(ioctx,
"localhost", 9900)``, with ``"env": None`` and the ``observation_space`` /
``action_space`` in the config). It listens on `address:port` and serves both of RLlib's
inference modes:

* remote inference: each client request runs on an `ExternalEnv` inside an embedded
  rollout worker (the trainer's policies, its config), whose sampler answers `get_action`
  with one batched forward pass for all waiting episodes. The batches it samples are what
  `next()` returns to the trainer, and the episodes' metrics reach the trainer's results;
  after each batch the embedded worker takes the trainer's newest weights.
* local inference: a client asks for the worker's description (``GET_WORKER_ARGS``, JSON
  data, see `corral.env.local_inference`) and for the weights (``GET_WEIGHTS``, numpy
  arrays), acts with a policy of its own and reports its batches and episode metrics
  (``REPORT_SAMPLES``), which `next()` and `get_metrics()` hand to the trainer.

Messages are JSON (`corral.env.serving_wire`); nothing a client sends is run as code.
"""

from __future__ import annotations

import logging
import queue
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from corral.env.external_env import ExternalEnv, ExternalEnvStopped
from corral.env.external_multi_agent_env import ExternalMultiAgentEnv
from corral.env.local_inference import worker_args
from corral.env.serving_wire import (
    Commands,
    batch_from_wire,
    dumps,
    loads,
    metrics_from_wire,
)
from corral.offline.input_reader import InputReader
from corral.policy.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch

logger = logging.getLogger(__name__)

# The columns a local-inference client's batch must have (it is trained on as it is).
_REPORTED_COLUMNS = (
    SampleBatch.OBS,
    SampleBatch.ACTIONS,
    SampleBatch.REWARDS,
    SampleBatch.DONES,
)


class _Served:
    """The external env the clients' requests run on; its own `run()` waits until the
    server closes."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.closing = threading.Event()

    def run(self) -> None:
        self.closing.wait()


class _ServedEnv(_Served, ExternalEnv):
    """One policy's clients (`default_policy` only)."""


class _ServedMultiAgentEnv(_Served, ExternalMultiAgentEnv):
    """A multi-agent trainer's clients: dicts by agent id."""


def served_env(multi_agent: bool, action_space: Any, observation_space: Any) -> Any:
    """An external env whose episodes are driven by calls from outside (the server's
    requests, or a local-inference client's own calls); its `run()` waits until
    `closing` is set. Multi-agent: dicts by agent id (`ExternalMultiAgentEnv`)."""
    return (_ServedMultiAgentEnv if multi_agent else _ServedEnv)(action_space, observation_space)


def serves_multi_agent(worker: Any) -> bool:
    """Multi-agent unless the worker's only policy is `default_policy` (RLlib's rule)."""
    return list(worker.policy_map) != [DEFAULT_POLICY_ID]


class PolicyServerInput(ThreadingHTTPServer, InputReader):
    """Serves the trainer's policy at `address:port` and reads the clients' experience.

    Args:
        ioctx: the `IOContext` of the rollout worker reading this input.
        address: the interface to listen on (e.g. "localhost").
        port: the port (RLlib's examples use a base port plus the worker index).
        idle_timeout: seconds `next()` waits for experience before it returns an empty
            batch (so that a trainer with several serving workers is not held up by one
            with no client).
    """

    def __init__(self, ioctx: Any, address: str, port: int, idle_timeout: float = 3.0) -> None:
        self.rollout_worker = ioctx.worker
        self.idle_timeout = float(idle_timeout)
        self.samples_queue: queue.Queue[SampleBatch | MultiAgentBatch] = queue.Queue()
        self.metrics_queue: queue.Queue[Any] = queue.Queue()
        self._env: Any = served_env(
            serves_multi_agent(self.rollout_worker),
            self._space("action_space"),
            self._space("observation_space"),
        )
        self._embedded: Any = None
        self._embedded_lock = threading.Lock()
        self._sampler_thread: threading.Thread | None = None
        self._closed = False
        super().__init__((address, port), _handler_for(self))
        self.daemon_threads = True
        threading.Thread(target=self.serve_forever, name="policy-server", daemon=True).start()

    def next(self) -> SampleBatch | MultiAgentBatch:
        """The next batch the clients' episodes produced (empty after `idle_timeout`)."""
        try:
            return self.samples_queue.get(timeout=self.idle_timeout)
        except queue.Empty:
            return SampleBatch()

    def close(self) -> None:
        """Stops serving (the worker's `stop()` calls it): the listening socket closes,
        the embedded worker's sampling ends and its thread is joined (a request still
        waiting for an action then fails)."""
        if self._closed:
            return
        self._closed = True
        self._env.closing.set()  # `run()` returns: the sampler's wait ends
        self._env.stop_episodes()  # requests waiting for an action end
        self.shutdown()
        self.server_close()
        if self._sampler_thread is not None:
            self._sampler_thread.join(timeout=30.0)

    def get_metrics(self) -> list[Any]:
        """The clients' episodes finished since the last call (`RolloutMetrics`)."""
        metrics = []
        while True:
            try:
                metrics.append(self.metrics_queue.get_nowait())
            except queue.Empty:
                return metrics

    def execute(self, message: dict[str, Any]) -> dict[str, Any]:
        """Runs one client request (remote inference: on the served external env); returns
        the reply."""
        command = message.get("command")
        env = self._env
        if self._closed:
            raise ValueError("The policy server is closed.")
        if command == Commands.START_EPISODE:
            self._start_embedded_worker()
            episode_id = env.start_episode(
                message.get("episode_id"), bool(message["training_enabled"])
            )
            return {"episode_id": episode_id}
        if command == Commands.GET_ACTION:
            return {"action": env.get_action(message["episode_id"], message["observation"])}
        if command == Commands.LOG_ACTION:
            env.log_action(message["episode_id"], message["observation"], message["action"])
        elif command == Commands.LOG_RETURNS:
            if env.multi_agent:
                env.log_returns(
                    message["episode_id"],
                    message["reward"],
                    message.get("info"),
                    message.get("done"),
                )
            else:
                env.log_returns(
                    message["episode_id"], float(message["reward"]), message.get("info")
                )
        elif command == Commands.END_EPISODE:
            env.end_episode(message["episode_id"], message["observation"])
        elif command == Commands.GET_WORKER_ARGS:
            return {
                "worker_args": worker_args(
                    self.rollout_worker, env.observation_space, env.action_space, env.multi_agent
                )
            }
        elif command == Commands.GET_WEIGHTS:
            return {
                "weights": self.rollout_worker.get_weights(),
                "global_vars": self.rollout_worker.get_global_vars(),
            }
        elif command == Commands.REPORT_SAMPLES:
            self._report(message)
        else:
            raise ValueError(f"Unknown command {command!r}")
        return {}

    def _report(self, message: dict[str, Any]) -> None:
        """A local-inference client's batch and finished episodes: checked, then queued
        for `next()` and `get_metrics()`."""
        batch = batch_from_wire(message.get("samples"))
        metrics = metrics_from_wire(message.get("metrics", []))
        worker = self.rollout_worker
        multi = self._env.multi_agent
        if multi != isinstance(batch, MultiAgentBatch):
            want = "MultiAgentBatch" if multi else "SampleBatch"
            raise ValueError(
                f"This server's policies are {sorted(worker.policy_map)}: it takes a {want}, "
                f"got a {type(batch).__name__}."
            )
        batches = (
            batch.policy_batches
            if isinstance(batch, MultiAgentBatch)
            else {DEFAULT_POLICY_ID: batch}
        )
        for pid, policy_batch in batches.items():
            if pid not in worker.policy_map:
                raise ValueError(
                    f"The reported batch holds policy {pid!r}, which this server does not have "
                    f"({sorted(worker.policy_map)})."
                )
            if not policy_batch.count:
                continue
            missing = sorted(set(_REPORTED_COLUMNS) - set(policy_batch))
            if missing:
                raise ValueError(f"The reported batch of policy {pid!r} lacks columns {missing}.")
            shape = getattr(getattr(worker.policy_map[pid], "preprocessor", None), "shape", None)
            obs_shape = tuple(policy_batch[SampleBatch.OBS].shape[1:])
            if shape is not None and obs_shape != tuple(shape):
                raise ValueError(
                    f"The reported observations of policy {pid!r} have shape {obs_shape}; the "
                    f"policy's are {tuple(shape)}."
                )
        self.samples_queue.put(batch)
        for metric in metrics:
            self.metrics_queue.put(metric)

    def _space(self, name: str) -> Any:
        worker = self.rollout_worker
        space = worker.config.get(name)
        if space is None:
            policies = list(worker.policy_map.values())
            if policies:
                space = getattr(policies[0], name)
        if space is None:
            raise ValueError(f"PolicyServerInput needs the trainer config's `{name}` (env=None).")
        return space

    def _start_embedded_worker(self) -> None:
        """The rollout worker sampling the served env, and its thread (once)."""
        with self._embedded_lock:
            if self._embedded is not None:
                return
            from corral.evaluation.rollout_worker import RolloutWorker
            from corral.policy.policy import PolicySpec

            server = self.rollout_worker
            specs = {
                pid: PolicySpec(type(policy), policy.observation_space, policy.action_space, {})
                for pid, policy in server.policy_map.items()
            }
            config = {
                **server.config,
                "input": "sampler",
                "output": None,
                "num_envs_per_worker": 1,
                "create_env_on_driver": True,
            }
            env = self._env
            worker = RolloutWorker(
                env_creator=lambda ctx: env,
                policy_specs=specs,
                config=config,
                worker_index=server.worker_index,
                num_workers=0,
            )
            worker.set_weights(server.get_weights(), server.get_global_vars())
            self._embedded = worker
            self._sampler_thread = threading.Thread(
                target=self._sample_forever, name="policy-server-sampler", daemon=True
            )
            self._sampler_thread.start()

    def _sample_forever(self) -> None:
        worker, server = self._embedded, self.rollout_worker
        while not self._closed:
            try:
                batch = worker.sample()
            except Exception:  # noqa: BLE001 - logged; the clients' requests then time out
                if not self._closed:
                    logger.exception("The policy server's sampler stopped")
                return
            self.samples_queue.put(batch)
            for metric in worker.get_metrics():
                self.metrics_queue.put(metric)
            worker.set_weights(server.get_weights(), server.get_global_vars())


def _handler_for(server: PolicyServerInput) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            try:
                length = int(self.headers.get("Content-Length", 0))
                reply = server.execute(loads(self.rfile.read(length)))
            except (Exception, ExternalEnvStopped) as error:  # the client gets the message
                logger.debug("Policy server request failed", exc_info=True)
                body = f"{type(error).__name__}: {error}".encode()
                self.send_response(500)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            body = dumps(reply)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - its signature
            logger.debug("policy server: " + format, *args)

    return Handler
