"""`PolicyClient`: an env anywhere learns with a trainer's `PolicyServerInput` over HTTP
(RLlib 1.13's policy serving).

The client calls what an `ExternalEnv`'s `run()` calls (`start_episode`, `get_action`,
`log_action`, `log_returns`, `end_episode`). With ``inference_mode="remote"`` the server
runs them on an external env inside the trainer, whose policy answers. With
``inference_mode="local"`` (RLlib's default) the client runs them on a rollout worker of
its own, built from the server's description of its worker, acting with a local copy of
the trainer's policy; a thread reports the sampled batches to the server and the client
pulls new weights every `update_interval` seconds (`corral.env.local_inference`).
Messages are JSON (`corral.env.serving_wire`), never pickles: nothing the server sends is
run as code.
"""

from __future__ import annotations

import http.client
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from corral.env.local_inference import LocalInference
from corral.env.rewards import as_reward
from corral.env.serving_wire import Commands, dumps, loads
from corral.utils.error import EnvError

# Seconds a request may take (a `get_action` waits for the trainer's sampler).
REQUEST_TIMEOUT_S = 600.0


class PolicyClient:
    """Talks to a `PolicyServerInput` at `address` (e.g. ``"http://localhost:9900"``).

    Args:
        address: the server's URL.
        inference_mode: ``"local"`` (RLlib's default): the client builds a rollout worker
            from the server's description of its worker (JSON data: the policies as
            registered algorithm names, the config's data, the spaces) and computes the
            actions itself; a background thread sends the sampled batches and episode
            metrics to the server. ``"remote"``: the server computes every action.
        update_interval: local inference: seconds between pulls of the trainer's weights
            (also pulled once when the client is built); None or 0: only on
            `update_policy_weights()`.
        config_overrides: local inference: config entries for the client's worker that
            the server cannot send because they are code (a multi-agent
            `policy_mapping_fn`, `callbacks`, an exploration class, ...); nested dicts
            merge. A custom model must be registered by name on the client
            (`ModelCatalog.register_custom_model`) instead.

    Raises:
        ValueError: an `inference_mode` other than "remote" and "local", a negative
            `update_interval`, or `config_overrides` with remote inference.
        EnvError: local inference: the server is unreachable, or its worker description is
            refused (an algorithm or custom model not registered on the client, code the
            client script did not give, a malformed reply).
    """

    Commands = Commands
    # RLlib 1.13's command names on the class (`PolicyClient.GET_ACTION`, ...).
    ACTION_SPACE = Commands.ACTION_SPACE
    OBSERVATION_SPACE = Commands.OBSERVATION_SPACE
    GET_WORKER_ARGS = Commands.GET_WORKER_ARGS
    GET_WEIGHTS = Commands.GET_WEIGHTS
    REPORT_SAMPLES = Commands.REPORT_SAMPLES
    START_EPISODE = Commands.START_EPISODE
    GET_ACTION = Commands.GET_ACTION
    LOG_ACTION = Commands.LOG_ACTION
    LOG_RETURNS = Commands.LOG_RETURNS
    END_EPISODE = Commands.END_EPISODE

    def __init__(
        self,
        address: str,
        inference_mode: str = "local",
        update_interval: float | None = 10.0,
        *,
        config_overrides: Mapping[str, Any] | None = None,
    ) -> None:
        if inference_mode not in ("remote", "local"):
            raise ValueError(f"inference_mode must be 'remote' or 'local', got {inference_mode!r}")
        if update_interval is not None and not (
            isinstance(update_interval, int | float) and update_interval >= 0
        ):
            raise ValueError(
                f"update_interval must be a number of seconds >= 0 or None, got {update_interval!r}"
            )
        if config_overrides is not None and (
            inference_mode != "local" or not isinstance(config_overrides, Mapping)
        ):
            raise ValueError(
                "config_overrides (a dict of config entries) applies to "
                f"inference_mode='local' only; got {type(config_overrides).__name__} with "
                f"inference_mode={inference_mode!r}."
            )
        self.address = address.rstrip("/")
        self.inference_mode = inference_mode
        self.update_interval = update_interval
        self.local = inference_mode == "local"
        self._local: LocalInference | None = None
        if self.local:
            self._local = LocalInference(self._send, update_interval, config_overrides)

    # RLlib's attributes of a local-inference client (None in remote mode).
    @property
    def env(self) -> Any:
        """Local inference: the client's external env."""
        return self._local.env if self._local else None

    @property
    def rollout_worker(self) -> Any:
        """Local inference: the client's rollout worker."""
        return self._local.worker if self._local else None

    @property
    def inference_thread(self) -> Any:
        """Local inference: the thread that samples and reports batches."""
        return self._local.thread if self._local else None

    @property
    def last_updated(self) -> float:
        """Local inference: when the weights were last pulled (`time.monotonic()`)."""
        return self._local.last_updated if self._local else 0.0

    def start_episode(self, episode_id: str | None = None, training_enabled: bool = True) -> str:
        """Starts an episode; returns its id."""
        if self._local:
            return str(self._local.call("start_episode", episode_id, training_enabled))
        reply = self._send(
            {
                "command": Commands.START_EPISODE,
                "episode_id": episode_id,
                "training_enabled": training_enabled,
            }
        )
        return str(reply["episode_id"])

    def get_action(self, episode_id: str | list | tuple, observation: Any) -> Any:
        """The policy's action for `observation` (local inference: several episodes at
        once as a list of ids and a dict of observations by id, answered by id)."""
        if self._local:
            if isinstance(episode_id, list | tuple):
                return {
                    eid: self._local.call("get_action", eid, observation[eid]) for eid in episode_id
                }
            return self._local.call("get_action", episode_id, observation)
        reply = self._send(
            {"command": Commands.GET_ACTION, "episode_id": episode_id, "observation": observation}
        )
        return reply["action"]

    def log_action(self, episode_id: str, observation: Any, action: Any) -> None:
        """Records an action taken by something else (off-policy data)."""
        if self._local:
            self._local.call("log_action", episode_id, observation, action)
            return
        self._send(
            {
                "command": Commands.LOG_ACTION,
                "episode_id": episode_id,
                "observation": observation,
                "action": action,
            }
        )

    def log_returns(
        self,
        episode_id: str,
        reward: float | dict[Any, float],
        info: dict | None = None,
        multiagent_done_dict: dict | None = None,
    ) -> None:
        """Adds `reward` to what the episode's last action earned (a multi-agent server:
        rewards and infos by agent, and `multiagent_done_dict` marking agents done)."""
        call = f"PolicyClient.log_returns({episode_id!r}, ...)"
        if isinstance(reward, dict):
            reward = {agent: as_reward(r, call) for agent, r in reward.items()}
        else:
            reward = as_reward(reward, call)
        if self._local:
            if self._local.env.multi_agent:
                self._local.call("log_returns", episode_id, reward, info, multiagent_done_dict)
            else:
                self._local.call("log_returns", episode_id, reward, info)
            return
        self._send(
            {
                "command": Commands.LOG_RETURNS,
                "episode_id": episode_id,
                "reward": reward,
                "info": info or {},
                "done": multiagent_done_dict,
            }
        )

    def end_episode(self, episode_id: str, observation: Any) -> None:
        """Ends the episode at its last `observation`."""
        if self._local:
            self._local.call("end_episode", episode_id, observation)
            return
        self._send(
            {"command": Commands.END_EPISODE, "episode_id": episode_id, "observation": observation}
        )

    def update_policy_weights(self) -> None:
        """Local inference: pulls the trainer's weights now (remote: nothing to do)."""
        if self._local:
            self._local.update_weights(force=True)

    def close(self) -> None:
        """Local inference: stops the background thread and the client's worker (the
        batch being sampled is not reported; later calls raise `EnvError`). Remote: no-op."""
        if self._local:
            self._local.close()

    def _send(self, message: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            self.address,
            data=dumps(message),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
                body = response.read()
        except urllib.error.HTTPError as error:
            detail = error.read().decode("utf-8", "replace")
            raise EnvError(
                f"Policy server {self.address} refused {message['command']}: {detail}"
            ) from None
        except (OSError, http.client.HTTPException) as error:  # URLError, resets, timeouts
            reason = getattr(error, "reason", error)
            raise EnvError(
                f"Policy server {self.address} unreachable ({message['command']}): {reason}"
            ) from None
        try:
            return loads(body)
        except (ValueError, TypeError, EOFError) as error:  # (JSONDecodeError included)
            raise EnvError(
                f"Policy server {self.address} answered {message['command']} with something "
                f"that is not a JSON message ({error}); corral reads nothing else."
            ) from None
