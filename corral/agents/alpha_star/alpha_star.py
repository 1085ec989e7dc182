"""AlphaStar: league-based multi-agent self-play on APPO (RLlib 1.13's `AlphaStarTrainer`).

Vinyals et al. 2019, "Grandmaster level in StarCraft II using multi-agent reinforcement
learning" (doi:10.1038/s41586-019-1724-z). A league of policies plays a two-player
game: the main policy, exploiters of the main policy and of the whole league, random
policies and frozen copies of them all. A `LeagueBuilder` (`league_builder_config`,
`corral.agents.alpha_star.league_builder`) sets the league up, picks the matches
(`policy_mapping_fn`) and, after every training step, copies each learning policy whose
win rate reached `win_rate_threshold_for_new_snapshot` into a new, usually frozen,
member (`Trainer.add_policy`).

Learning is APPO's (`corral.agents.ppo.appo`: workers sampling with requests in flight,
a learner thread, V-trace, PPO's clipped surrogate), with AlphaStar's per-policy
replay: RLlib 1.13 trains each learning policy on a GPU actor of its own, fed by a
replay-buffer actor of its shard (`DistributedLearners`); corral keeps those shards in
the driver. Each sampled fragment's batches of learning policies go to their shard's
`MixInMultiAgentReplayBuffer` (the last `replay_buffer_capacity` batches per policy),
which gives them back mixed with replayed batches (`replay_buffer_replay_ratio` of them
replayed), and the learner thread trains every learning policy on its own part of each
train batch; frozen policies' batches are dropped. `train_batch_size` counts the newly
sampled steps (replayed ones come on top).
"""

from __future__ import annotations

import logging
from typing import Any

from corral.agents.alpha_star.distributed_learners import DistributedLearners
from corral.agents.alpha_star.league_builder import AlphaStarLeagueBuilder, LeagueBuilder
from corral.agents.config_merge import copy_config
from corral.agents.ppo.appo import CONFIG_SPECS as APPO_CONFIG_SPECS
from corral.agents.ppo.appo import DEFAULT_CONFIG as APPO_DEFAULT_CONFIG
from corral.agents.ppo.appo import APPOTrainer
from corral.agents.trainer import Trainer
from corral.execution.buffers.mixin_replay_buffer import MixInMultiAgentReplayBuffer
from corral.policy.policy import Policy
from corral.policy.sample_batch import MultiAgentBatch
from corral.utils.config_spec import AnyValue, Dict, Float, Int, Optional
from corral.utils.from_config import from_config

logger = logging.getLogger(__name__)

DEFAULT_CONFIG = Trainer.merge_trainer_configs(
    APPO_DEFAULT_CONFIG,
    {
        # Batches kept for replay per learning policy.
        "replay_buffer_capacity": 20,
        # Share of replayed batches in each policy's train data, in [0, 1] (0.5: one
        # replayed batch per new one; 0.0: no replay).
        "replay_buffer_replay_ratio": 0.5,
        # Seconds a training step waits for a first sampled fragment.
        "sample_wait_timeout": 0.01,
        # RLlib's wait for its policy learner actors' results; corral's learner thread
        # never makes the driver wait: accepted and without effect.
        "learn_wait_timeout": 0.1,
        # The league builder and its settings: "type" is a `LeagueBuilder` subclass (or
        # its name, e.g. "NoLeagueBuilder", or a dotted path); the other keys are its
        # constructor's arguments (a new "type" replaces all of them).
        "league_builder_config": {
            "type": AlphaStarLeagueBuilder,
            # Random policies in the initial league (even: half league exploiters, half
            # main exploiters).
            "num_random_policies": 2,
            # Learning league exploiters at the start.
            "num_learning_league_exploiters": 4,
            # Learning main exploiters at the start.
            "num_learning_main_exploiters": 4,
            # Win rate in [0, 1] at which a learning policy is copied into a new member.
            "win_rate_threshold_for_new_snapshot": 0.9,
            # Probability that a copy of an exploiter keeps learning (copies of main
            # never do).
            "keep_new_snapshot_training_prob": 0.0,
            # Probability of a match of a learning league exploiter against a frozen
            # member.
            "prob_league_exploiter_match": 0.33,
            # Probability of a match of a learning main exploiter against main (the rest
            # of the matches: main's self-play).
            "prob_main_exploiter_match": 0.33,
            # In main-exploiter matches: probability of playing the learning main rather
            # than a frozen copy of it.
            "prob_main_exploiter_playing_against_learning_main": 0.5,
        },
        # Most policies that may learn at once (each with its replay); None: as many as
        # learn at the start.
        "max_num_policies_to_train": None,
        # Train on the last step of cut trajectory pieces too (bootstrapped with its
        # next observation's value).
        "vtrace_drop_last_ts": False,
        # Each `train()` call lasts at least this many seconds.
        "min_time_s_per_reporting": 2,
        # Steps run `training_step` (RLlib's switch; AlphaStar has no execution plan).
        "_disable_execution_plan_api": True,
    },
    _allow_unknown_configs=True,
)

CONFIG_SPECS = {
    **APPO_CONFIG_SPECS,
    "replay_buffer_capacity": Int(1),
    "replay_buffer_replay_ratio": Float(0, 1),
    "sample_wait_timeout": Float(0),
    "learn_wait_timeout": Float(0),
    "league_builder_config": Dict(
        {
            "type": AnyValue("a LeagueBuilder subclass, its name or a dotted path"),
            "num_random_policies": Int(0),
            "num_learning_league_exploiters": Int(0),
            "num_learning_main_exploiters": Int(0),
            "win_rate_threshold_for_new_snapshot": Float(0, 1),
            "keep_new_snapshot_training_prob": Float(0, 1),
            "prob_league_exploiter_match": Float(0, 1),
            "prob_main_exploiter_match": Float(0, 1),
            "prob_main_exploiter_playing_against_learning_main": Float(0, 1),
        },
        what="a dict of the league builder's settings",
    ),
    "max_num_policies_to_train": Optional(Int(1)),
}


class AlphaStarTrainer(APPOTrainer):
    """League-based self-play: APPO's learning, a league builder, per-policy replay."""

    _name = "AlphaStar"
    _default_config = DEFAULT_CONFIG
    _config_specs = CONFIG_SPECS
    _override_all_subkeys_if_type_changes = [
        *APPOTrainer._override_all_subkeys_if_type_changes,
        "league_builder_config",
    ]

    def validate_config(self, config: dict) -> None:
        # The league builder shapes the multi-agent setup before the workers exist;
        # checkpoints save the setup it started from (`_checkpoint_config`).
        self._given_multiagent = copy_config(config["multiagent"])
        self.league_builder = self._make_league_builder(config)
        super().validate_config(config)
        if config["replay_proportion"] > 0:
            raise ValueError(
                f"replay_proportion={config['replay_proportion']}: AlphaStar replays per "
                "policy; set `replay_buffer_replay_ratio` (and `replay_buffer_capacity`) "
                "instead and leave `replay_proportion` 0."
            )
        multiagent = config["multiagent"]
        to_train = multiagent.get("policies_to_train") or list(multiagent["policies"])
        limit = config["max_num_policies_to_train"]
        if limit is not None and not callable(to_train) and len(to_train) > limit:
            raise ValueError(
                f"max_num_policies_to_train={limit}, but {len(to_train)} policies learn "
                f"from the start ({sorted(to_train)}): raise it or train fewer."
            )

    def _make_league_builder(self, config: dict) -> LeagueBuilder:
        settings = config["league_builder_config"]
        try:
            builder = from_config(LeagueBuilder, settings, trainer=self, trainer_config=config)
        except TypeError as e:
            raise ValueError(
                f"`league_builder_config` {settings!r} does not fit its type's constructor: {e}"
            ) from e
        if not isinstance(builder, LeagueBuilder):
            raise TypeError(
                "`league_builder_config.type` must be a LeagueBuilder subclass, got "
                f"{type(builder).__name__}."
            )
        return builder

    def setup(self, config: dict) -> None:
        super().setup(config)
        local = self.workers.local_worker()
        learning = sorted(local.get_policies_to_train())
        if self.config["max_num_policies_to_train"] is None:
            self.config["max_num_policies_to_train"] = max(len(learning), 1)
        self.distributed_learners = DistributedLearners(
            config=self.config,
            max_num_policies_to_train=self.config["max_num_policies_to_train"],
            replay_actor_class=MixInMultiAgentReplayBuffer,
            replay_actor_args=[
                self.config["replay_buffer_capacity"],
                self.config["replay_buffer_replay_ratio"],
            ],
            policy_map=local.policy_map,
            # Each shard replays a stream of its own, drawn from the trainer's seed.
            replay_seed=self.config["seed"],
        )
        for pid in learning:
            self.distributed_learners.add_policy(pid)
        # Per-policy replay instead of IMPALA's whole-fragment replay.
        self._replay = self._replay_per_policy

    def _replay_per_policy(self, batch: Any) -> list[MultiAgentBatch]:
        """A sampled fragment -> the train-batch pieces: the learning policies' new
        batches with replayed ones mixed in (none when no learning policy played)."""
        self.distributed_learners.add_batch(batch)
        mixed = self.distributed_learners.replay()
        return [MultiAgentBatch(mixed, batch.env_steps())] if mixed else []

    def _sample_wait_s(self) -> float:
        return float(self.config["sample_wait_timeout"])

    # -- the league ----------------------------------------------------------

    def step(self) -> dict:
        """One iteration (training and maybe evaluation), then a step of league building."""
        result = super().step()
        with self._learning_paused():
            self.league_builder.build_league(result=result)
        self._send_win_rates()
        return result

    def _send_win_rates(self) -> None:
        """Gives every rollout worker the league's win rates (its matchmaking reads them
        from `worker.global_vars["win_rates"]`)."""
        win_rates = dict(getattr(self.league_builder, "win_rates", None) or {})
        if not win_rates:
            return
        global_vars = {"win_rates": win_rates}
        self.workers.local_worker().set_global_vars(global_vars)
        for handle in self.workers.remote_workers():
            # Not waited for: the worker runs it before its next sample request.
            handle.call("set_global_vars", global_vars)

    def add_policy(self, policy_id: str, policy_cls: type[Policy], **kwargs: Any) -> Policy:
        """`Trainer.add_policy`; a policy learns only when `policies_to_train` lists it
        (as in RLlib 1.13's AlphaStar: None keeps the policies that learn now), and then
        gets a place in a learner shard.

        Raises:
            RuntimeError: more policies would learn than `max_num_policies_to_train`.
        """
        to_train = kwargs.get("policies_to_train")
        local = self.workers.local_worker()
        if to_train is None and not callable(local.policies_to_train):
            to_train = kwargs["policies_to_train"] = sorted(local.get_policies_to_train())
        if to_train is not None and not callable(to_train):
            limit = self.config["max_num_policies_to_train"]
            if len(set(to_train)) > limit:
                raise RuntimeError(
                    f"All shards are full: max_num_policies_to_train={limit}, but "
                    f"{len(set(to_train))} policies would learn ({sorted(set(to_train))})."
                )
        return super().add_policy(policy_id, policy_cls, **kwargs)

    def _sync_learner_policies(self) -> None:
        super()._sync_learner_policies()
        learners = getattr(self, "distributed_learners", None)
        if learners is None:
            return
        learning = self.workers.local_worker().get_policies_to_train()
        for pid, _, _ in list(learners):
            if pid not in learning:
                learners.remove_policy(pid)
        for pid in sorted(learning):
            learners.add_policy(pid)

    # -- checkpoints ---------------------------------------------------------

    def _checkpoint_config(self) -> dict:
        """The config with the multi-agent setup as given (the league builder makes the
        league again from it) and a league builder of this module named, not imported."""
        config = {**self.config, "multiagent": self._given_multiagent}
        settings = dict(config["league_builder_config"])
        kind = settings.get("type")
        if isinstance(kind, type) and kind.__module__ == LeagueBuilder.__module__:
            settings["type"] = kind.__name__
        config["league_builder_config"] = settings
        return config

    def _extra_checkpoint_state(self) -> dict:
        return {**super()._extra_checkpoint_state(), "league_builder": self._league_state()}

    def _set_extra_checkpoint_state(self, state: dict) -> None:
        super()._set_extra_checkpoint_state(state)
        self._set_league_state(state.get("league_builder"))

    def __getstate__(self) -> dict:
        return {**super().__getstate__(), "league_builder": self._league_state()}

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._set_league_state(state.get("league_builder"))

    def _league_state(self) -> dict:
        return self.league_builder.__getstate__()

    def _set_league_state(self, state: dict | None) -> None:
        if state is not None:
            self.league_builder.__setstate__(state)
            self._send_win_rates()

    def cleanup(self) -> None:
        learners = getattr(self, "distributed_learners", None)
        if learners is not None:
            learners.stop()
        super().cleanup()
