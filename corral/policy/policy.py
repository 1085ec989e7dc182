"""Policy base class and `PolicySpec`."""

from __future__ import annotations

from typing import Any, NamedTuple


class PolicySpec(NamedTuple):
    """How to build one policy: class (None = the trainer's default), spaces
    (None = inferred from the env) and per-policy config overrides."""

    policy_class: type | None = None
    observation_space: Any = None
    action_space: Any = None
    config: dict | None = None
