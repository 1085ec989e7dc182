"""RLlib's ``FlexDict``: a Dict space whose entries can be set after construction."""

from __future__ import annotations

from typing import Any

import gymnasium as gym


class FlexDict(gym.spaces.Dict):
    """A ``gymnasium.spaces.Dict`` that also takes ``space[key] = subspace``."""

    def __init__(self, spaces: dict | None = None, **spaces_kwargs: gym.Space) -> None:
        if spaces is not None and spaces_kwargs:
            raise ValueError("Use either FlexDict(spaces=dict(...)) or FlexDict(foo=x, bar=z)")
        super().__init__(spaces if spaces is not None else spaces_kwargs)

    def assertSpace(self, space: Any) -> None:  # noqa: N802 (RLlib's name)
        """Raises `TypeError` unless `space` is a Gymnasium space (what an entry must be)."""
        if not isinstance(space, gym.Space):
            raise TypeError(f"Values of the dict should be gymnasium spaces, got {space!r}")

    def __setitem__(self, key: Any, space: gym.Space) -> None:
        self.assertSpace(space)
        self.spaces[key] = space

    def __repr__(self) -> str:
        return "FlexDict(" + ", ".join(f"{k}:{s}" for k, s in self.spaces.items()) + ")"
