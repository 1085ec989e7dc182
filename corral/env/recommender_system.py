"""A small interest-evolution recommender env: slates of documents for a simulated user.

A self-contained, numpy-only simulation in the spirit of RecSim's interest-evolution
environment (Ie et al., 2019, arXiv:1909.04847), with the observation and action layout
RLlib's RecSim wrappers give SlateQ (RecSim itself needs TensorFlow; this env does not):

- observation ``{"user": ..., "doc": {"0": ..., "1": ..., ...}, "response": (...)}``:
  the user's topic interests (``Box(-1, 1, (num_topics,))``), each candidate document's
  topic features (``Box(0, 1, (num_topics,))``, a one-hot topic), and for each slot of the
  previous slate the user's response ``{"click": Discrete(2), "watch_time": Box(0,
  video_length, ())}`` (no click and 0 at reset);
- action ``MultiDiscrete([num_candidates] * slate_size)``: the candidates shown, by index
  (``"3"`` is candidate 3). A slate should show distinct candidates; one that repeats a
  candidate shows it in each of its slots.

Each step the user sees the slate and clicks at most one document, by a conditional
(multinomial) logit choice model over the slate plus a "no click" option::

    P(click slot k) = exp(choice_beta * u . d_k) / (sum_j exp(choice_beta * u . d_j)
                                                    + exp(no_click_score)),

where ``u`` are the interests and ``d_k`` the document's features. A clicked document is
watched for ``video_length * (1 + quality) / 2`` minutes, the step's reward (0 without a
click). Each topic has a fixed quality, from -1 (topic 0) to 1 (the last topic), and each
document's quality is its topic's plus a little noise. The session ends (terminated) when
the user's time budget is used up: every step costs ``step_penalty`` minutes, a watched
video its watch time, of which ``quality_bonus * max(quality, 0)`` is given back (good
videos keep users around, clickbait does not). A budget shrinks by at least
``step_penalty`` each step, so an episode lasts at most ``ceil(time_budget /
step_penalty)`` steps. A click moves the interest ``x`` in the clicked topic by
``interest_update_rate * (1 - x)``, up with probability ``(1 + x) / 2`` and down
otherwise (RecSim's interest evolution), clipped to [-1, 1].

A good policy shows documents the user likes (they get clicked) of high quality (they
are watched longer and lengthen the session); the myopically most clicked documents are
not always those. Registered as ``"RecSysInterestEvolution-v0"``; configured by
``env_config`` (keys of :data:`DEFAULT_ENV_CONFIG`); deterministic given
``reset(seed=...)`` (or the ``seed`` key).
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np

# The name this env is registered under (`corral.tune.registry.register_env`).
ENV_NAME = "RecSysInterestEvolution-v0"

DEFAULT_ENV_CONFIG: dict[str, Any] = {
    # Candidate documents offered each step; the slate picks from them.
    "num_candidates": 10,
    # Documents shown per step (the action's length).
    "slate_size": 2,
    # Topics: the size of the user's interest vector and of each document's features.
    "num_topics": 10,
    # Draw new candidates every step (True) or keep one set for the whole episode.
    "resample_documents": True,
    # The user's time budget (minutes) at the start of a session.
    "time_budget": 60.0,
    # Minutes each step costs, clicked or not (> 0: it bounds the episode's length).
    "step_penalty": 1.0,
    # Length of every video (minutes): the most a click is watched.
    "video_length": 4.0,
    # Weight of the interest-feature affinity in the click logits.
    "choice_beta": 3.0,
    # Click logit of the "no click" option.
    "no_click_score": 1.0,
    # How far a click moves the interest in the clicked topic (towards +-1).
    "interest_update_rate": 0.1,
    # Share of a watched video's time given back to the budget per unit of positive quality.
    "quality_bonus": 0.9,
    # Standard deviation of a document's quality around its topic's.
    "quality_noise": 0.1,
    # Seed of the first `reset()` without one (None: a fresh random seed).
    "seed": None,
}


def _config(config: dict | None) -> dict[str, Any]:
    """`DEFAULT_ENV_CONFIG` updated with `config`, checked.

    Raises:
        ValueError: an unknown key or a value out of range.
    """
    given = dict(config or {})
    unknown = sorted(set(given) - set(DEFAULT_ENV_CONFIG))
    if unknown:
        raise ValueError(
            f"Unknown env_config keys {unknown} for {ENV_NAME}; expected keys of "
            f"{sorted(DEFAULT_ENV_CONFIG)}."
        )
    cfg = {**DEFAULT_ENV_CONFIG, **given}
    for key, value in cfg.items():
        if key == "seed":
            expected, ok = "an int or None", value is None or _is_int(value)
        elif key == "resample_documents":
            expected, ok = "a bool", isinstance(value, (bool, np.bool_))
        elif isinstance(DEFAULT_ENV_CONFIG[key], int):
            expected, ok = "an int", _is_int(value)
        else:
            expected = "a finite number"
            ok = _is_number(value) and math.isfinite(value)
        if not ok:
            raise ValueError(f"{ENV_NAME}: env_config {key} must be {expected}, got {value!r}.")
    checks = {
        "num_candidates": cfg["num_candidates"] >= 1,
        "num_topics": cfg["num_topics"] >= 1,
        "slate_size": 1 <= cfg["slate_size"] <= cfg["num_candidates"],
        "time_budget": cfg["time_budget"] > 0,
        "step_penalty": cfg["step_penalty"] > 0,
        "video_length": cfg["video_length"] > 0,
        "interest_update_rate": 0 <= cfg["interest_update_rate"] <= 1,
        "quality_bonus": 0 <= cfg["quality_bonus"] <= 1,
        "quality_noise": cfg["quality_noise"] >= 0,
    }
    for key, ok in checks.items():
        if not ok:
            raise ValueError(
                f"{ENV_NAME}: env_config {key}={cfg[key]!r} is out of range (see "
                "corral.env.recommender_system.DEFAULT_ENV_CONFIG)."
            )
    return cfg


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_number(value: Any) -> bool:
    return _is_int(value) or isinstance(value, (float, np.floating))


class InterestEvolutionEnv(gym.Env):
    """A user session of slate recommendations whose interests evolve (see the module).

    Args:
        config: the ``env_config`` (an `EnvContext` or dict), keys of
            :data:`DEFAULT_ENV_CONFIG`.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, config: dict | None = None) -> None:
        cfg = _config(config)
        self.num_candidates = int(cfg["num_candidates"])
        self.slate_size = int(cfg["slate_size"])
        self.num_topics = int(cfg["num_topics"])
        self.resample_documents = bool(cfg["resample_documents"])
        self.time_budget = float(cfg["time_budget"])
        self.step_penalty = float(cfg["step_penalty"])
        self.video_length = float(cfg["video_length"])
        self.choice_beta = float(cfg["choice_beta"])
        self.no_click_score = float(cfg["no_click_score"])
        self.interest_update_rate = float(cfg["interest_update_rate"])
        self.quality_bonus = float(cfg["quality_bonus"])
        self.quality_noise = float(cfg["quality_noise"])
        self._first_seed = cfg["seed"]
        # Topic t's quality: from -1 (topic 0, clickbait) to 1 (the last topic).
        self.topic_quality = np.linspace(-1.0, 1.0, self.num_topics)

        t = self.num_topics
        self.observation_space = gym.spaces.Dict(
            {
                "user": gym.spaces.Box(-1.0, 1.0, (t,), np.float32),
                "doc": gym.spaces.Dict(
                    {
                        str(i): gym.spaces.Box(0.0, 1.0, (t,), np.float32)
                        for i in range(self.num_candidates)
                    }
                ),
                "response": gym.spaces.Tuple(
                    [
                        gym.spaces.Dict(
                            {
                                "click": gym.spaces.Discrete(2),
                                "watch_time": gym.spaces.Box(
                                    0.0, self.video_length, (), np.float32
                                ),
                            }
                        )
                        for _ in range(self.slate_size)
                    ]
                ),
            }
        )
        self.action_space = gym.spaces.MultiDiscrete([self.num_candidates] * self.slate_size)
        self.interests = np.zeros(t)
        self.budget = self.time_budget
        self.doc_topics = np.zeros(self.num_candidates, np.int64)
        self.doc_quality = np.zeros(self.num_candidates)

    @property
    def max_episode_steps(self) -> int:
        """The most steps an episode can last: ``ceil(time_budget / step_penalty)``."""
        return math.ceil(self.time_budget / self.step_penalty)

    def reset(
        self, *, seed: int | None = None, options: dict | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        if seed is None and self._first_seed is not None:
            seed = int(self._first_seed)
        self._first_seed = None
        super().reset(seed=seed)
        self.interests = self.np_random.uniform(-1.0, 1.0, self.num_topics)
        self.budget = self.time_budget
        self._sample_documents()
        responses = [(0, 0.0)] * self.slate_size
        return self._observation(responses), {"time_budget": self.budget}

    def step(self, action: Any) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        slate = np.asarray(action, dtype=np.int64).reshape(-1)
        if slate.shape != (self.slate_size,) or not (
            (slate >= 0).all() and (slate < self.num_candidates).all()
        ):
            raise ValueError(
                f"{ENV_NAME}: a slate is {self.slate_size} candidate indices in "
                f"[0, {self.num_candidates}), got {action!r}."
            )
        topics = self.doc_topics[slate]
        quality = self.doc_quality[slate]
        # Conditional logit over the slate's documents and "no click" (the last option).
        logits = np.append(self.choice_beta * self.interests[topics], self.no_click_score)
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        choice = int(self.np_random.choice(self.slate_size + 1, p=probs))

        reward = 0.0
        self.budget -= self.step_penalty
        responses = [(0, 0.0)] * self.slate_size
        if choice < self.slate_size:
            q = float(quality[choice])
            reward = self.video_length * (1.0 + q) / 2.0
            self.budget -= reward * (1.0 - self.quality_bonus * max(q, 0.0))
            responses[choice] = (1, reward)
            self._evolve_interest(int(topics[choice]))
        terminated = self.budget <= 0.0
        if self.resample_documents:
            self._sample_documents()
        info = {
            "time_budget": self.budget,
            "clicked_slot": choice if choice < self.slate_size else -1,
        }
        return self._observation(responses), reward, terminated, False, info

    def _evolve_interest(self, topic: int) -> None:
        """RecSim's interest update: the clicked topic's interest x moves by
        ``rate * (1 - x)``, up with probability ``(1 + x) / 2``, else down."""
        x = self.interests[topic]
        update = self.interest_update_rate * (1.0 - x)
        if self.np_random.random() < (1.0 + x) / 2.0:
            x += update
        else:
            x -= update
        self.interests[topic] = np.clip(x, -1.0, 1.0)

    def _sample_documents(self) -> None:
        self.doc_topics = self.np_random.integers(0, self.num_topics, self.num_candidates)
        noise = self.np_random.normal(0.0, self.quality_noise, self.num_candidates)
        self.doc_quality = np.clip(self.topic_quality[self.doc_topics] + noise, -1.0, 1.0)

    def _observation(self, responses: list[tuple[int, float]]) -> dict[str, Any]:
        features = np.zeros((self.num_candidates, self.num_topics), np.float32)
        features[np.arange(self.num_candidates), self.doc_topics] = 1.0
        return {
            "user": self.interests.astype(np.float32),
            "doc": {str(i): features[i] for i in range(self.num_candidates)},
            "response": tuple(
                {"click": click, "watch_time": np.asarray(watch, np.float32)}
                for click, watch in responses
            ),
        }


def _register() -> None:
    from corral.tune.registry import register_env

    register_env(ENV_NAME, InterestEvolutionEnv)


_register()

__all__ = ["DEFAULT_ENV_CONFIG", "ENV_NAME", "InterestEvolutionEnv"]
