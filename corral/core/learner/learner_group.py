"""`LearnerGroup`: the learners of a trainer (one, in the driver, for now)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from corral.core.learner.learner import Learner


class LearnerGroup:
    """Runs `Learner.update` on the trainer's learners and merges their metrics.

    With `num_learners=0` (the default) there is one learner, in the driver,
    updating the local worker's policies in place.
    """

    def __init__(
        self,
        config: dict,
        policies: Mapping[str, Any],
        callbacks: Any = None,
        *,
        policy_ids: Iterable[str] | None = None,
    ) -> None:
        num_learners = int(config.get("num_learners", 0) or 0)
        if num_learners > 0:
            raise NotImplementedError(
                f"num_learners={num_learners}: data-parallel learners are not implemented yet; "
                "use num_learners=0 (train in the driver)."
            )
        self.config = config
        self.local_learner = Learner(policies, config, callbacks, policy_ids=policy_ids)

    @property
    def is_local(self) -> bool:
        return True

    def update(self, *args: Any, **kwargs: Any) -> dict | None:
        """`Learner.update` on every learner; the result has `Stats` leaves."""
        return self.local_learner.update(*args, **kwargs)

    def add_policy(self, policy_id: str, policy: Any) -> None:
        """Every learner starts training `policy` (with a fresh optimiser)."""
        self.local_learner.add_policy(policy_id, policy)

    def remove_policy(self, policy_id: str) -> None:
        self.local_learner.remove_policy(policy_id)

    def set_policies_to_train(self, policy_ids: Iterable[str]) -> None:
        self.local_learner.set_policies_to_train(policy_ids)

    def get_state(self) -> dict[str, Any]:
        return self.local_learner.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        self.local_learner.set_state(state)
