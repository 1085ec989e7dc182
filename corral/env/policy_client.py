"""`PolicyClient`: an env anywhere asks a trainer's `PolicyServerInput` for actions
over HTTP (RLlib 1.13's policy serving, remote inference).

The client calls what an `ExternalEnv`'s `run()` calls (`start_episode`, `get_action`,
`log_action`, `log_returns`, `end_episode`); the server runs them on an external env
inside the trainer, whose policy answers and whose steps the trainer learns from.
Messages are JSON (`corral.env.serving_wire`), never pickles.
"""

from __future__ import annotations

import http.client
import urllib.error
import urllib.request
import warnings
from typing import Any

from corral.env.serving_wire import Commands, dumps, loads
from corral.utils.error import EnvError

# Seconds a request may take (a `get_action` waits for the trainer's sampler).
REQUEST_TIMEOUT_S = 600.0


class PolicyClient:
    """Talks to a `PolicyServerInput` at `address` (e.g. ``"http://localhost:9900"``).

    Args:
        address: the server's URL.
        inference_mode: ``"remote"``: the server computes every action. RLlib's default,
            ``"local"`` (a policy copy in the client, its weights pulled every
            `update_interval` s), runs as ``"remote"`` with a warning: the copy would be
            built from the trainer's worker configuration, which RLlib sends as a pickle
            (code the client would run). The actions come from the same policy either way,
            the server's being the newest.
        update_interval: RLlib's weight-pull period of local inference (unused).

    Raises:
        ValueError: an `inference_mode` other than "remote" and "local".
    """

    Commands = Commands

    def __init__(
        self, address: str, inference_mode: str = "local", update_interval: float | None = 10.0
    ) -> None:
        if inference_mode not in ("remote", "local"):
            raise ValueError(f"inference_mode must be 'remote' or 'local', got {inference_mode!r}")
        if inference_mode == "local":
            warnings.warn(
                "PolicyClient(inference_mode='local') runs as 'remote' in corral: the server "
                "computes the actions (a local policy copy would be built from a pickled "
                "worker configuration, which corral never loads).",
                stacklevel=2,
            )
            inference_mode = "remote"
        self.address = address.rstrip("/")
        self.inference_mode = inference_mode
        self.update_interval = update_interval

    def start_episode(self, episode_id: str | None = None, training_enabled: bool = True) -> str:
        """Starts an episode on the server; returns its id."""
        reply = self._send(
            {
                "command": Commands.START_EPISODE,
                "episode_id": episode_id,
                "training_enabled": training_enabled,
            }
        )
        return str(reply["episode_id"])

    def get_action(self, episode_id: str, observation: Any) -> Any:
        """The server policy's action for `observation`."""
        reply = self._send(
            {"command": Commands.GET_ACTION, "episode_id": episode_id, "observation": observation}
        )
        return reply["action"]

    def log_action(self, episode_id: str, observation: Any, action: Any) -> None:
        """Records an action taken by something else (off-policy data)."""
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
        if isinstance(reward, dict):
            reward = {agent: float(r) for agent, r in reward.items()}
        else:
            reward = float(reward)
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
        self._send(
            {"command": Commands.END_EPISODE, "episode_id": episode_id, "observation": observation}
        )

    def update_policy_weights(self) -> None:
        """Local inference's weight pull: nothing to do (the server computes the actions)."""

    def _send(self, message: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            self.address,
            data=dumps(message),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
                return loads(response.read())
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
