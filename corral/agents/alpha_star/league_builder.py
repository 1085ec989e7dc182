"""League building for AlphaStar (RLlib 1.13's `agents.alpha_star.league_builder`).

A `LeagueBuilder` shapes the trainer's multi-agent setup before the workers are built
(`trainer_config["multiagent"]`) and changes the league after every training step
(`build_league(result)`), e.g. with `Trainer.add_policy`. Its state (`__getstate__`, JSON
data only) is saved in the trainer's checkpoints and given back by `__setstate__`.

`AlphaStarLeagueBuilder` follows the AlphaStar league (Vinyals et al. 2019,
doi:10.1038/s41586-019-1724-z) as RLlib 1.13 builds it:

- the league starts with one learning main policy `main_0`, `num_random_policies`
  random ones (half named `league_exploiter_<i>`, half `main_exploiter_<i>`), and
  `num_learning_league_exploiters` / `num_learning_main_exploiters` learning exploiters
  (numbered after the random ones);
- after each step, each policy's win rate is the share of its games with a positive
  return among the result's `hist_stats["policy_<id>_reward"]` (the evaluation's when
  the step evaluated). A learning policy whose win rate reaches
  `win_rate_threshold_for_new_snapshot` is copied into a new policy of its kind (`main_<n>`,
  `league_exploiter_<n>`, `main_exploiter_<n>`, numbered on), which is frozen (copies of
  exploiters keep learning with probability `keep_new_snapshot_training_prob`; copies of
  main never do);
- matchmaking (`AlphaStarMatchmaking`, the `policy_mapping_fn`): until the first copy,
  `main_0` plays `main_exploiter_0` (random by default). Afterwards each episode is a
  league-exploiter match (probability `prob_league_exploiter_match`: a learning league
  exploiter against a frozen policy), a main-exploiter match (`prob_main_exploiter_match`:
  a learning main exploiter against `main_0`, or with probability
  1 - `prob_main_exploiter_playing_against_learning_main` against a frozen copy of main),
  or else main's self-play. Frozen opponents are drawn with probabilities softmax(their
  win rates): the strongest ones most often, a form of prioritized fictitious self-play.

Where corral differs from RLlib 1.13, on purpose: the match of an episode is drawn once
for both players (RLlib draws it again for each agent); a policy is copied again only
once the smoothing window of the win rates (`metrics_smoothing_episodes`) holds no game
played before its last copy (RLlib copies it every step while the window still shows the
old win rate); exploiter numbers are ints and the learning main exploiters number
`num_learning_main_exploiters`; the random draws come from a generator seeded by the
config's `seed` and saved with the league.
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.policy.policy import PolicySpec
from corral.policy.random_policy import RandomPolicy
from corral.utils.numpy import softmax

if TYPE_CHECKING:
    from corral.agents.trainer import Trainer

logger = logging.getLogger(__name__)

MAIN = "main_0"
_MAIN_COPY = re.compile(r"^main(_\d+)?$")
_REWARD_KEY = re.compile(r"^policy_(.+)_reward$")
# Matches kept per worker by `AlphaStarMatchmaking` (episodes run at once are far fewer).
_MATCH_CACHE_SIZE = 4096


def win_rates_from(hist_stats: dict[str, Any]) -> dict[str, float]:
    """Each policy's share of games won (return > 0) in `hist_stats["policy_<id>_reward"]`;
    policies without games are left out."""
    rates = {}
    for key, returns in hist_stats.items():
        found = _REWARD_KEY.match(key)
        if found is not None and len(returns) > 0:
            rates[found.group(1)] = float(np.mean(np.asarray(returns, dtype=np.float64) > 0.0))
    return rates


class LeagueBuilder:
    """Base class of league builders: called by the trainer after every training step.

    Args:
        trainer: the trainer that uses this builder (None when built only to shape a
            config).
        trainer_config: the trainer's config, before the workers are built: a builder
            may set its `multiagent` part here.
    """

    def __init__(self, trainer: Trainer | None, trainer_config: dict) -> None:
        self.trainer = trainer
        self.config = trainer_config

    def build_league(self, result: dict) -> None:
        """Changes the league after a training step.

        Args:
            result: the step's result dict (episode returns per policy in
                `hist_stats`, the evaluation's under "evaluation" when it evaluated).
        """
        raise NotImplementedError

    def __getstate__(self) -> dict[str, Any]:
        """The builder's state, JSON data only (saved in checkpoints)."""
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restores what `__getstate__` returned (after the league's policies are back)."""


class NoLeagueBuilder(LeagueBuilder):
    """A league builder that changes nothing: the multi-agent setup is the config's own
    (simple self-play or any fixed set of policies on AlphaStar's learner)."""

    def build_league(self, result: dict) -> None:
        pass


class AlphaStarMatchmaking:
    """The `policy_mapping_fn` of an AlphaStar league (see the module doc).

    The match of an episode is drawn at its first call and kept for its other agents.
    The learner's seat follows RLlib: for int agent ids, the agent whose id equals the
    episode id modulo 2; otherwise the first agent asked when the episode id is even,
    the second when it is odd. Every other agent plays the opponent.

    Args:
        trainable: the learning policies.
        frozen: the frozen ones (opponents of league-exploiter matches).
        num_main_policies: `main_0` plus its frozen copies `main_1 ...`.
        initial: play `main_0` against `initial_opponent` only (no copy made yet).
        initial_opponent: the opponent of the initial matches.
        prob_league_exploiter_match: see the module doc.
        prob_main_exploiter_match: see the module doc.
        prob_main_exploiter_playing_against_learning_main: see the module doc.
    """

    def __init__(
        self,
        *,
        trainable: Iterable[str],
        frozen: Iterable[str],
        num_main_policies: int,
        initial: bool,
        initial_opponent: str,
        prob_league_exploiter_match: float,
        prob_main_exploiter_match: float,
        prob_main_exploiter_playing_against_learning_main: float,
    ) -> None:
        self.trainable = sorted(trainable)
        self.frozen = sorted(frozen)
        self.num_main_policies = num_main_policies
        self.initial = initial
        self.initial_opponent = initial_opponent
        self.probs_match_types = [
            prob_league_exploiter_match,
            prob_main_exploiter_match,
            max(0.0, 1.0 - prob_league_exploiter_match - prob_main_exploiter_match),
        ]
        self.prob_playing_learning_main = prob_main_exploiter_playing_against_learning_main
        self._matches: OrderedDict[Any, dict[str, Any]] = OrderedDict()

    def __call__(
        self, agent_id: Any, episode: Any = None, worker: Any = None, **kwargs: Any
    ) -> str:
        if episode is None:
            return MAIN
        key = episode.episode_id
        match = self._matches.get(key)
        if match is None:
            learner, opponent = self.draw_match(getattr(worker, "global_vars", None) or {})
            match = {"learner": learner, "opponent": opponent, "agents": []}
            self._matches[key] = match
            while len(self._matches) > _MATCH_CACHE_SIZE:
                self._matches.popitem(last=False)
        agents = match["agents"]
        if agent_id not in agents:
            agents.append(agent_id)
        if isinstance(agent_id, int | np.integer) and not isinstance(agent_id, bool):
            learner_seat = int(agent_id) == key % 2
        else:
            learner_seat = agents.index(agent_id) == key % 2
        return match["learner"] if learner_seat else match["opponent"]

    def draw_match(self, global_vars: dict[str, Any]) -> tuple[str, str]:
        """(learner, opponent) of a new episode; `global_vars["win_rates"]` weighs the
        frozen opponents."""
        if self.initial:
            return MAIN, self.initial_opponent
        win_rates = global_vars.get("win_rates") or {}
        kind = np.random.choice(["LE", "ME", "M"], p=self.probs_match_types)
        if kind == "LE":
            exploiters = [p for p in self.trainable if p.startswith("league_exploiter")]
            if exploiters:
                opponent = _pick_by_win_rate(self.frozen, win_rates) or MAIN
                return str(np.random.choice(exploiters)), opponent
        elif kind == "ME":
            exploiters = [p for p in self.trainable if p.startswith("main_exploiter")]
            if exploiters:
                learner = str(np.random.choice(exploiters))
                if self.num_main_policies == 1 or np.random.random() < (
                    self.prob_playing_learning_main
                ):
                    return learner, MAIN
                copies = [f"main_{i}" for i in range(1, self.num_main_policies)]
                return learner, _pick_by_win_rate(copies, win_rates) or MAIN
        return MAIN, MAIN


def _pick_by_win_rate(candidates: list[str], win_rates: dict[str, float]) -> str | None:
    """One of `candidates`, drawn with probabilities softmax(win rate) (None if none)."""
    if not candidates:
        return None
    probs = softmax(np.asarray([win_rates.get(p, 0.0) for p in candidates], np.float64))
    return str(np.random.choice(candidates, p=probs / probs.sum()))


class AlphaStarLeagueBuilder(LeagueBuilder):
    """The AlphaStar league (see the module doc).

    Args:
        trainer: the trainer (None when only shaping a config).
        trainer_config: the trainer's config; its `multiagent` policies, policies to
            train and mapping fn are set here (policies must not be given, except the
            league's own ids, as a saved config of this league has them).
        num_random_policies: random policies in the initial league (even: half are
            league exploiters, half main exploiters).
        num_learning_league_exploiters: learning league exploiters at the start.
        num_learning_main_exploiters: learning main exploiters at the start.
        win_rate_threshold_for_new_snapshot: win rate in [0, 1] at which a learning
            policy is copied.
        keep_new_snapshot_training_prob: probability that a copy of an exploiter keeps
            learning.
        prob_league_exploiter_match: probability of a league-exploiter match.
        prob_main_exploiter_match: probability of a main-exploiter match.
        prob_main_exploiter_playing_against_learning_main: in main-exploiter matches,
            probability of playing the learning `main_0` rather than a frozen copy.

    Raises:
        ValueError: a value out of range (named), or policies given in the config.
    """

    def __init__(
        self,
        trainer: Trainer | None,
        trainer_config: dict,
        num_random_policies: int = 2,
        num_learning_league_exploiters: int = 4,
        num_learning_main_exploiters: int = 4,
        win_rate_threshold_for_new_snapshot: float = 0.8,
        keep_new_snapshot_training_prob: float = 0.0,
        prob_league_exploiter_match: float = 0.33,
        prob_main_exploiter_match: float = 0.33,
        prob_main_exploiter_playing_against_learning_main: float = 0.5,
    ) -> None:
        super().__init__(trainer, trainer_config)
        where = "league_builder_config"
        for name, value in (
            ("num_random_policies", num_random_policies),
            ("num_learning_league_exploiters", num_learning_league_exploiters),
            ("num_learning_main_exploiters", num_learning_main_exploiters),
        ):
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
                raise ValueError(f"`{where}.{name}` must be an int >= 0, got {value!r}.")
        if num_random_policies % 2:
            raise ValueError(
                f"`{where}.num_random_policies` must be even (half become league exploiters, "
                f"half main exploiters), got {num_random_policies}."
            )
        for name, prob in (
            ("win_rate_threshold_for_new_snapshot", win_rate_threshold_for_new_snapshot),
            ("keep_new_snapshot_training_prob", keep_new_snapshot_training_prob),
            ("prob_league_exploiter_match", prob_league_exploiter_match),
            ("prob_main_exploiter_match", prob_main_exploiter_match),
            (
                "prob_main_exploiter_playing_against_learning_main",
                prob_main_exploiter_playing_against_learning_main,
            ),
        ):
            if not 0.0 <= prob <= 1.0:
                raise ValueError(f"`{where}.{name}` must be a number in [0, 1], got {prob!r}.")
        if prob_league_exploiter_match + prob_main_exploiter_match > 1.0:
            raise ValueError(
                f"`{where}.prob_league_exploiter_match` + `prob_main_exploiter_match` must be "
                f"<= 1 (the rest is main's self-play), got {prob_league_exploiter_match} + "
                f"{prob_main_exploiter_match}."
            )
        self.win_rate_threshold_for_new_snapshot = win_rate_threshold_for_new_snapshot
        self.keep_new_snapshot_training_prob = keep_new_snapshot_training_prob
        self.prob_league_exploiter_match = prob_league_exploiter_match
        self.prob_main_exploiter_match = prob_main_exploiter_match
        self.prob_main_exploiter_playing_against_learning_main = (
            prob_main_exploiter_playing_against_learning_main
        )
        # Latest win rate of every policy that played (also sent to the workers, whose
        # matchmaking weighs frozen opponents by them).
        self.win_rates: dict[str, float] = {}
        # The next number of each kind of policy.
        half = num_random_policies // 2
        self.main_policies = 1
        self.league_exploiters = half + num_learning_league_exploiters
        self.main_exploiters = half + num_learning_main_exploiters
        # Copies made so far (0: the initial matches still run).
        self.num_snapshots = 0
        # `episodes_total` when each learning policy was last copied (or created).
        self.snapshot_marks: dict[str, int] = {}
        self._rng = np.random.default_rng(trainer_config.get("seed"))

        policies: dict[str, PolicySpec] = {MAIN: PolicySpec()}
        to_train = [MAIN]
        for i in range(half):
            policies[f"league_exploiter_{i}"] = PolicySpec(policy_class=RandomPolicy)
            policies[f"main_exploiter_{i}"] = PolicySpec(policy_class=RandomPolicy)
        for i in range(half, self.league_exploiters):
            policies[f"league_exploiter_{i}"] = PolicySpec()
            to_train.append(f"league_exploiter_{i}")
        for i in range(half, self.main_exploiters):
            policies[f"main_exploiter_{i}"] = PolicySpec()
            to_train.append(f"main_exploiter_{i}")
        self._check_no_policies_given(trainer_config.get("multiagent") or {}, policies)
        multiagent = trainer_config.setdefault("multiagent", {})
        multiagent["policies"] = policies
        multiagent["policies_to_train"] = to_train
        multiagent["policy_mapping_fn"] = self.matchmaking(to_train, set(policies) - {*to_train})

    @staticmethod
    def _check_no_policies_given(multiagent: dict, league: dict[str, PolicySpec]) -> None:
        given = multiagent.get("policies") or {}
        ids = set(given)
        if not ids or ids == {"default_policy"} or ids == set(league):
            return  # none (or the default one validation fills in), or this league's own
        raise ValueError(
            "`multiagent.policies` must not be given with AlphaStarLeagueBuilder: it builds "
            f"the league itself ({sorted(league)}); got {sorted(ids)}. To train your own "
            "policies on AlphaStar, set league_builder_config={'type': 'NoLeagueBuilder'}."
        )

    def matchmaking(self, trainable: Iterable[str], frozen: Iterable[str]) -> AlphaStarMatchmaking:
        """The mapping fn of the league as it is now."""
        frozen = sorted(frozen)
        initial_opponent = "main_exploiter_0"
        if initial_opponent not in {*trainable, *frozen}:
            initial_opponent = MAIN
        return AlphaStarMatchmaking(
            trainable=trainable,
            frozen=frozen,
            num_main_policies=self.main_policies,
            initial=self.num_snapshots == 0,
            initial_opponent=initial_opponent,
            prob_league_exploiter_match=self.prob_league_exploiter_match,
            prob_main_exploiter_match=self.prob_main_exploiter_match,
            prob_main_exploiter_playing_against_learning_main=(
                self.prob_main_exploiter_playing_against_learning_main
            ),
        )

    def build_league(self, result: dict) -> None:
        assert self.trainer is not None, "build_league needs the trainer"
        evaluated = "evaluation" in result
        hist_stats = result["evaluation" if evaluated else "hist_stats"]
        if evaluated:
            hist_stats = hist_stats["hist_stats"]
        local = self.trainer.workers.local_worker()
        trainable = local.get_policies_to_train()
        frozen = set(local.policy_map) - trainable
        rates = win_rates_from(hist_stats)
        self.win_rates.update(rates)
        episodes = int(result.get("episodes_total", 0))
        window = int(self.trainer.config.get("metrics_smoothing_episodes") or 0)
        for policy_id, win_rate in sorted(rates.items()):
            if policy_id not in trainable:
                continue
            if win_rate < self.win_rate_threshold_for_new_snapshot:
                logger.info("%s: win rate %.2f, keeps learning", policy_id, win_rate)
                continue
            # Training results smooth over a window of episodes: wait until it shows
            # only games played since this policy's last copy.
            if not evaluated and episodes - self.snapshot_marks.get(policy_id, 0) < window:
                continue
            self._snapshot(policy_id, trainable, frozen, episodes)

    def _snapshot(
        self, policy_id: str, trainable: set[str], frozen: set[str], episodes: int
    ) -> None:
        """Adds a copy of `policy_id` to the league (updating `trainable` / `frozen`)."""
        assert self.trainer is not None
        source = self.trainer.get_policy(policy_id)
        if source is None:
            raise KeyError(f"The league has no policy {policy_id!r} to copy.")
        keep_training = _MAIN_COPY.match(policy_id) is None and bool(
            self._rng.random() < self.keep_new_snapshot_training_prob
        )
        limit = self.trainer.config.get("max_num_policies_to_train")
        if keep_training and limit is not None and len(trainable) >= limit:
            logger.warning(
                "The copy of %s stays frozen: %d policies learn already "
                "(max_num_policies_to_train=%d).",
                policy_id,
                len(trainable),
                limit,
            )
            keep_training = False
        if policy_id.startswith("league_exploiter"):
            new_id = f"league_exploiter_{self.league_exploiters}"
            self.league_exploiters += 1
        elif policy_id.startswith("main_exploiter"):
            new_id = f"main_exploiter_{self.main_exploiters}"
            self.main_exploiters += 1
        else:
            new_id = f"main_{self.main_policies}"
            self.main_policies += 1
        (trainable if keep_training else frozen).add(new_id)
        self.num_snapshots += 1
        self.snapshot_marks[policy_id] = episodes
        if keep_training:
            self.snapshot_marks[new_id] = episodes
        logger.info(
            "%s: win rate %.2f, copied into %s (%s)",
            policy_id,
            self.win_rates[policy_id],
            new_id,
            "learning" if keep_training else "frozen",
        )
        self.trainer.add_policy(
            new_id,
            type(source),
            policy_state=source.get_state(),
            policy_mapping_fn=self.matchmaking(trainable, frozen),
            policies_to_train=sorted(trainable),
        )

    def __getstate__(self) -> dict[str, Any]:
        return {
            "win_rates": dict(self.win_rates),
            "main_policies": self.main_policies,
            "league_exploiters": self.league_exploiters,
            "main_exploiters": self.main_exploiters,
            "num_snapshots": self.num_snapshots,
            "snapshot_marks": dict(self.snapshot_marks),
            "rng": self._rng.bit_generator.state,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.win_rates = {str(k): float(v) for k, v in state["win_rates"].items()}
        self.main_policies = int(state["main_policies"])
        self.league_exploiters = int(state["league_exploiters"])
        self.main_exploiters = int(state["main_exploiters"])
        self.num_snapshots = int(state.get("num_snapshots", 0))
        self.snapshot_marks = {str(k): int(v) for k, v in state.get("snapshot_marks", {}).items()}
        if state.get("rng"):
            self._rng.bit_generator.state = state["rng"]
        trainer = getattr(self, "trainer", None)
        if trainer is not None and getattr(trainer, "workers", None) is not None:
            # The league's policies are back (the checkpoint's added ones): match them.
            local = trainer.workers.local_worker()
            trainable = local.get_policies_to_train()
            frozen = set(local.policy_map) - trainable
            trainer.set_policy_mapping_fn(self.matchmaking(trainable, frozen))
