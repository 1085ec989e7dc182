"""RLlib 1.x's `build_torch_policy`: `build_policy_class` with `framework="torch"`.

RLlib 1.13 kept the name as a deprecated alias; so does corral (one warning per call).
"""

from __future__ import annotations

from typing import Any

from corral.policy.policy_template import build_policy_class
from corral.utils.deprecation import deprecation_warning


def build_torch_policy(name: str, **kwargs: Any) -> type:
    """`build_policy_class(name, framework="torch", **kwargs)`; see its arguments."""
    deprecation_warning(
        old="build_torch_policy", new="build_policy_class(framework='torch')", error=False
    )
    return build_policy_class(name, "torch", **kwargs)
