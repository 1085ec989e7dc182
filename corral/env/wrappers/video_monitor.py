"""`VideoMonitor`: RLlib 1.13's video recorder, on Gymnasium's `RecordVideo`."""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
from gymnasium.wrappers import RecordVideo


class VideoMonitor(RecordVideo):
    """gym's `Monitor` (removed in gym 0.23), which RLlib 1.13 subclassed, with its
    arguments: Gymnasium's `RecordVideo` writes the videos.

    Args:
        env: an env made with `render_mode="rgb_array"`.
        directory: where the videos go.
        video_callable: episode index -> whether to record it (default: Gymnasium's
            schedule, episodes 0, 1, 8, 27, ... (cubes), then every 1,000th).
        force: accepted (Monitor deleted earlier recordings in `directory`; `RecordVideo`
            writes beside them and never deletes).
        resume: accepted (earlier files are always kept).
        write_upon_reset: accepted (Monitor's statistics file; none is written).
        uid: the videos' file-name prefix (default "rl-video").
        mode: accepted (Monitor's "training"/"evaluation" label of its statistics).

    Raises:
        ValueError: `env` renders no frames.
    """

    def __init__(
        self,
        env: gym.Env,
        directory: str,
        video_callable: Callable[[int], bool] | None = None,
        force: bool = False,
        resume: bool = False,
        write_upon_reset: bool = False,
        uid: str | None = None,
        mode: str | None = None,
    ) -> None:
        if not str(getattr(env, "render_mode", None)).startswith("rgb_array"):
            raise ValueError(
                f"VideoMonitor needs an env made with render_mode='rgb_array' (frames to "
                f"record), got render_mode={getattr(env, 'render_mode', None)!r}."
            )
        super().__init__(
            env,
            directory,
            episode_trigger=video_callable,
            name_prefix=uid or "rl-video",
            disable_logger=True,
        )
