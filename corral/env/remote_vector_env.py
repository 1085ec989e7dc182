"""`RemoteVectorEnv`: each sub-env in a process of its own (`remote_worker_envs`).

For envs whose `step`/`reset` take long (simulators, games), n sub-envs in n
processes step in parallel: the sampler sends every sub-env its action first
and only then collects the results (`step_all`), so one step of the vector
costs about one step of the slowest sub-env instead of the sum.

Processes are forked (`os.fork`, POSIX only), like the rollout workers of
`corral.evaluation.backend`: env creators that are lambdas or closures need no
pickling, and a process starts in milliseconds. Each sub-env talks to its
owner over one pipe, one request and one reply at a time, so there is no reader
thread: the owner (a rollout worker) is single-threaded while it samples.

RLlib polls remote envs and continues with those that answered within
`remote_env_batch_wait_ms`; corral's sampler steps all sub-envs in lockstep, so it
always waits for every sub-env: RLlib's behaviour with a wait longer than any step
(see `check_remote_env_batch_wait_ms`).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import pickle
import signal
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any, cast

import gymnasium as gym

from corral.env.multi_agent_env import MultiAgentEnv
from corral.env.vector_env import VectorizedGymEnv
from corral.utils.child_process import serve, start_forked
from corral.utils.error import EnvError

logger = logging.getLogger(__name__)

# Seconds `close()` waits for a sub-env to close itself before it is killed.
_CLOSE_TIMEOUT_S = 5.0
# A `remote_env_batch_wait_ms` below this (and above 0) asks for polls that return
# before slow sub-envs answer, which lockstep stepping cannot do: it gets a warning.
_SHORT_WAIT_MS = 1000.0


def check_remote_env_batch_wait_ms(value: Any) -> float:
    """`remote_env_batch_wait_ms`: a number of milliseconds, at least 0.

    RLlib 1.13's remote envs return from `poll()` with the sub-envs that answered within
    that many milliseconds; corral's step in lockstep: every `poll()` waits for all of
    them, as RLlib's do with a wait longer than any step (its tests give 99999999 for
    that). Any wait is accepted; one shorter than `_SHORT_WAIT_MS`, other than RLlib's
    default 0, gets a warning that corral waits for every sub-env all the same.

    Returns:
        The value, as a float.

    Raises:
        ValueError: the value is not a number, or negative.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(
            f"remote_env_batch_wait_ms must be a number of milliseconds >= 0, got {value!r}."
        )
    if 0 < value < _SHORT_WAIT_MS:
        logger.warning(
            "remote_env_batch_wait_ms=%r: corral's remote sub-envs (remote_worker_envs) step "
            "in lockstep, so every poll waits for all of them, also those slower than the "
            "wait (RLlib's behaviour with a wait longer than any step).",
            value,
        )
    return float(value)


class RemoteCall:
    """`sub_env.<name>` of a `RemoteSubEnv`: calling it, or its `.remote(...)` (the form
    of RLlib 1.13's Ray actor sub-envs), runs `env.<name>(...)` in the sub-env's process
    and returns the result (for an attribute that is not callable: its value)."""

    def __init__(self, handle: RemoteSubEnv, name: str) -> None:
        self._handle, self._name = handle, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._handle.call(self._name, *args, **kwargs)

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        """The same call (RLlib 1.13's actor-method form)."""
        return self._handle.call(self._name, *args, **kwargs)


class RemoteSubEnv:
    """The owner's handle on one sub-env living in a child process.

    It quacks like the `gymnasium.Env` it stands for where the sampler and
    callbacks need it (`reset`, `step`, `render`, `close`, the spaces, `spec`,
    `render_mode`); anything else runs in the child through
    `call(method, *args, **kwargs)`.
    """

    def __init__(
        self,
        make_env: Callable[[int], gym.Env],
        vector_index: int,
        worker_index: int,
        inherited: Sequence[Any] = (),
    ) -> None:
        self.vector_index = vector_index
        self.worker_index = worker_index
        parent_conn, child_conn = mp.Pipe(duplex=True)
        self._conn = parent_conn
        self._process = _ForkedChild(
            _env_main, (child_conn, make_env, vector_index, [*inherited, parent_conn])
        )
        child_conn.close()
        self._closed = False
        self._dead = False
        info = self._receive()
        self.observation_space: gym.Space = info["observation_space"]
        self.action_space: gym.Space = info["action_space"]
        self.spec = info["spec"]
        self.render_mode: str | None = info["render_mode"]
        self.metadata: dict = info["metadata"]
        self.can_render: bool = info["can_render"]
        self.is_multi_agent: bool = info["is_multi_agent"]
        # A `MultiAgentEnv`'s agent ids and per-agent spaces, as it declared them once
        # made (fixed for an env's life), read in the owner without a round trip.
        for name, value in info["mirrored"].items():
            setattr(self, name, value)
        # Attributes read from the child whenever they are read (a `MultiAgentEnv`'s
        # `agents` changes as agents come and go).
        self._live_names = frozenset(info["live_names"])
        self._public_names = frozenset(info["public_names"])

    def __getattr__(self, name: str) -> Any:
        """`handle.<name>`: the sub-env's own method or attribute `name`, run in the child
        when called, as `handle.<name>(...)` or, as RLlib 1.13's sub-env actors were
        called, `handle.<name>.remote(...)` (the result comes back directly). A
        `MultiAgentEnv`'s `agents` is its current value, read from the child."""
        if name.startswith("_") or name not in self.__dict__.get("_public_names", ()):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        if name in self.__dict__.get("_live_names", ()):
            return self.call(name)
        return RemoteCall(self, name)

    @property
    def pid(self) -> int | None:
        """The sub-env process's pid."""
        return self._process.pid

    @property
    def unwrapped(self) -> RemoteSubEnv:
        """This handle (the env itself lives in the child)."""
        return self

    def is_alive(self) -> bool:
        """Whether the sub-env's process is still running."""
        return self._process.is_alive()

    # -- the env API, forwarded -----------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """`env.reset(seed=..., options=...)` in the child."""
        self._send(("reset", {"seed": seed, "options": options}))
        return self._receive()

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        """`env.step(action)` in the child."""
        self._send(("step", action))
        return self._receive()

    def render(self) -> Any:
        """`env.render()` in the child (its frame comes back)."""
        return self.call("render")

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Runs `env.<method>(*args, **kwargs)` in the child and returns its result;
        for an attribute that is not callable, returns its value."""
        self._send(("call", (method, args, kwargs)))
        return self._receive()

    def close(self) -> None:
        """Closes the env in the child, then ends the process (killed if it hangs)."""
        if self._closed:
            return
        self._closed = True
        if self._process.is_alive():
            with contextlib.suppress(OSError, EOFError, BrokenPipeError):
                self._conn.send(("close", None))
                if self._conn.poll(_CLOSE_TIMEOUT_S):
                    self._conn.recv()
            self._process.join(_CLOSE_TIMEOUT_S)
        if self._process.is_alive():
            os.kill(self._process.pid, signal.SIGKILL)
            self._process.join(_CLOSE_TIMEOUT_S)
        self._conn.close()

    # -- the pipe -------------------------------------------------------------

    def _send(self, message: tuple) -> None:
        if self._closed or self._dead:
            raise EnvError(f"{self._name()} was closed or has died.")
        # On a dead pipe the reply read that follows reports how the process died.
        with contextlib.suppress(OSError, EOFError, BrokenPipeError):
            self._conn.send(message)

    def _receive(self) -> Any:
        try:
            status, payload = self._conn.recv()
        except (OSError, EOFError):
            raise self._died() from None
        if status == "ok":
            return payload
        kind, message, tb = payload
        raise EnvError(
            f"{self._name()} raised {kind}: {message}\n--- traceback in the sub-env ---\n{tb}"
        )

    def _died(self) -> EnvError:
        self._process.join(timeout=1.0)
        code = self._process.exitcode
        how = f"killed by signal {-code}" if code and code < 0 else f"exit code {code}"
        self._dead = True
        return EnvError(f"{self._name()} died ({how}).")

    def _name(self) -> str:
        return f"Remote sub-env {self.vector_index} of worker {self.worker_index} (pid {self.pid})"

    def __repr__(self) -> str:
        return f"RemoteSubEnv(worker={self.worker_index}, index={self.vector_index})"


class RemoteVectorEnv(VectorizedGymEnv):
    """`num_envs` sub-envs, each built by `make_env(vector_index)` in its own process.

    `get_sub_environments()` returns the `RemoteSubEnv` handles.
    """

    def __init__(
        self, make_env: Callable[[int], gym.Env], num_envs: int, worker_index: int = 0
    ) -> None:
        handles: list[RemoteSubEnv] = []
        try:
            for i in range(num_envs):
                # A child closes its copies of its elder siblings' pipes, so each
                # pipe's ends live in exactly two processes (EOF means death).
                conns = [h._conn for h in handles]
                handles.append(RemoteSubEnv(make_env, i, worker_index, conns))
        except BaseException:
            for h in handles:
                h.close()
            raise
        kinds = {h.is_multi_agent for h in handles}
        if len(kinds) > 1:
            for h in handles:
                h.close()
            raise ValueError(
                "RemoteVectorEnv: make_env built MultiAgentEnvs and single-agent envs; "
                "the sub-envs of one worker must be all one or all the other."
            )
        # Whether the sub-envs are `MultiAgentEnv`s (`BaseEnv.multi_agent`: their
        # observations, rewards and actions are per-agent dicts).
        self.multi_agent = True in kinds
        # The handles quack like the envs they stand for (see `RemoteSubEnv`).
        super().__init__(cast(list[gym.Env], handles))

    def step_all(self, actions: Sequence[Any]) -> list[tuple]:
        """Sends every sub-env its action, then collects the results in order.

        All replies are read even when one fails, so the pipes stay in step;
        the first failure is raised afterwards.
        """
        results: list[tuple] = []
        for outcome in self.try_step_all(actions):
            if isinstance(outcome, EnvError):
                raise outcome
            results.append(outcome)
        return results

    def try_step_all(self, actions: Sequence[Any]) -> list[tuple | EnvError]:
        """Like `step_all`, but a failed sub-env's entry is its `EnvError` (with the
        sub-env's own exception and traceback) instead of a raise, so the others'
        results are kept (`restart_failed_sub_environments`)."""
        envs = self._handles()
        for env, action in zip(envs, actions):
            env._send(("step", action))
        outcomes: list[tuple | EnvError] = []
        for env in envs:
            try:
                outcomes.append(env._receive())
            except EnvError as e:
                outcomes.append(e)
        return outcomes

    def _handles(self) -> list[RemoteSubEnv]:
        """The sub-envs' handles (`self.envs`, which a restarted sub-env replaces in place)."""
        return cast(list[RemoteSubEnv], self.envs)

    def stop(self) -> None:
        """Closes every sub-env and ends its process."""
        for env in self._handles():
            env.close()


def can_render(env: Any) -> bool:
    """Whether `render()` on `env` draws or returns something.

    A Gymnasium env renders only when created with a `render_mode`; a custom
    env without one renders when its class defines `render` (RLlib 1.x envs). An env
    that knows better says so with a bool `can_render` attribute (a sub-env in its own
    process; `make_multi_agent`'s env, which renders its first copy).
    """
    answer = getattr(env, "can_render", None)
    if isinstance(answer, bool):
        return answer
    if getattr(env, "render_mode", None) is not None:
        return True
    unwrapped = getattr(env, "unwrapped", env)
    render = getattr(type(unwrapped), "render", None)
    # (`MultiAgentEnv.render` is RLlib 1.13's default, which renders nothing.)
    own_render = render is not None and render not in (gym.Env.render, MultiAgentEnv.render)
    return own_render and getattr(env, "spec", None) is None


class _ForkedChild:
    """A child process made with a bare `os.fork` (POSIX only).

    Not `multiprocessing.Process`: rollout workers are daemonic processes, and
    multiprocessing refuses to start children from those; a bare fork also
    starts faster and needs nothing pickled.
    """

    def __init__(self, target: Callable[..., None], args: tuple) -> None:
        self.exitcode: int | None = None
        self.pid = start_forked(os.fork)
        if self.pid == 0:  # the child: run, then leave without the parent's atexit hooks
            code = 1
            try:
                target(*args)
                code = 0
            finally:
                os._exit(code)

    def _reap(self, block: bool = False) -> bool:
        if self.exitcode is not None:
            return True
        try:
            pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:  # already reaped elsewhere
            self.exitcode = -1
            return True
        if pid == 0:
            return False
        self.exitcode = os.waitstatus_to_exitcode(status)
        return True

    def is_alive(self) -> bool:
        return not self._reap()

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self._reap() and time.monotonic() < deadline:
            time.sleep(0.01)


def _env_main(
    conn: Connection, make_env: Callable[[int], gym.Env], vector_index: int, inherited: list[Any]
) -> None:
    serve(conn, lambda: _build_env(make_env, vector_index), _answer, inherited)


def _build_env(make_env: Callable[[int], gym.Env], vector_index: int) -> tuple[gym.Env, dict]:
    """The sub-env, and what its owner's handle mirrors of it (spaces, spec, ...)."""
    env = make_env(vector_index)
    spec = getattr(env, "spec", None)
    try:
        pickle.dumps(spec)
    except Exception:  # noqa: BLE001 - a spec with unpicklable kwargs is just left out
        spec = None
    multi_agent = isinstance(env, MultiAgentEnv)
    mirrored = {}
    if multi_agent:
        for name in _MIRRORED_MULTI_AGENT_NAMES:
            value = getattr(env, name, None)
            if not callable(value):
                mirrored[name] = value
    info = {
        "observation_space": env.observation_space,
        "action_space": env.action_space,
        "spec": spec,
        "render_mode": getattr(env, "render_mode", None),
        "metadata": dict(getattr(env, "metadata", {}) or {}),
        "can_render": can_render(env),
        "is_multi_agent": multi_agent,
        "mirrored": mirrored,
        "live_names": ["agents"] if multi_agent else [],
        # What the owner's handle offers as `handle.<name>(...)` /
        # `handle.<name>.remote(...)` (RLlib 1.13's sub-envs were Ray actors).
        "public_names": sorted(
            {n for layer in _layers(env) for n in dir(layer) if not n.startswith("_")}
        ),
    }
    return env, info


# What a `RemoteSubEnv` of a `MultiAgentEnv` copies from the env once it is made (an
# env declares its agents and their spaces for its whole life).
_MIRRORED_MULTI_AGENT_NAMES = ("possible_agents", "observation_spaces", "action_spaces")


def _layers(env: Any) -> list[Any]:
    """`env` and what it wraps, outermost first (Gymnasium wrappers' `env`, Shimmy's
    `gym_env`, then `unwrapped`): the user's own methods may sit on an inner layer."""
    layers, seen, current = [], set(), env
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        layers.append(current)
        own = getattr(current, "__dict__", {})
        inner = own.get("env") or own.get("gym_env")
        current = inner if inner is not None else getattr(current, "unwrapped", None)
    return layers


def _find_attr(env: Any, name: str) -> Any:
    """`env.<name>` on the outermost layer that has it (see `_layers`)."""
    for layer in _layers(env):
        try:
            return getattr(layer, name)
        except AttributeError:
            continue
    raise AttributeError(f"{type(env).__name__!r} object has no attribute {name!r}")


def _answer(env: gym.Env, request: tuple[str, Any]) -> tuple[Any, bool]:
    """One request of the owner: (reply value, whether it was the last)."""
    kind, payload = request
    if kind == "step":
        return env.step(payload), False
    if kind == "reset":
        return env.reset(**payload), False
    if kind == "call":
        method, args, kwargs = payload
        attr = _find_attr(env, method)
        return (attr(*args, **kwargs) if callable(attr) else attr), False
    # "close"
    with contextlib.suppress(Exception):
        env.close()
    return None, True
