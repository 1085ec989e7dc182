"""`ObservationFunction`: the multi-agent `observation_fn` hook as a class (RLlib 1.13's)."""

from __future__ import annotations

from typing import Any


class ObservationFunction:
    """Rewrites the agents' observations of each multi-agent step before the policies see
    them (e.g. to add other agents' observations for a centralised critic).

    Subclass it and override `__call__`; give the subclass (or an instance, or a plain
    function of the same arguments) as `config["multiagent"]["observation_fn"]`. It runs
    on each reset and step, on the raw observations, before preprocessing; the agents it
    returns are the ones that act next.
    """

    def __call__(
        self,
        agent_obs: dict[Any, Any],
        worker: Any,
        base_env: Any,
        policies: dict[str, Any],
        episode: Any,
        **kwargs: Any,
    ) -> dict[Any, Any]:
        """Returns the observations by agent id (this base class: `agent_obs` unchanged).

        Args:
            agent_obs: each agent's observation from the env.
            worker: the rollout worker.
            base_env: the worker's `BaseEnv`.
            policies: the worker's policies by id.
            episode: the episode the step belongs to.
        """
        return agent_obs
