"""RLlib 1.13 behaviour of samplers, episodes, postprocessing helpers and callbacks."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

from corral.agents.callbacks import DefaultCallbacks
from corral.agents.pg import PGTrainer
from corral.agents.ppo import PPOTrainer
from corral.env.multi_agent_env import make_multi_agent
from corral.evaluation.postprocessing import (
    Postprocessing,
    adjust_nstep,
    compute_advantages,
    discount_cumsum,
)
from corral.policy.sample_batch import SampleBatch

BASE = {"env": "CartPole-v1", "num_workers": 0, "rollout_fragment_length": 20}


def test_discount_cumsum():
    np.testing.assert_allclose(discount_cumsum(np.array([1.0, 2.0, 3.0]), 0.5), [2.75, 3.5, 3.0])


def test_compute_advantages_rllib_signature_with_last_r():
    batch = SampleBatch(
        {"rewards": np.array([1.0, 1.0], np.float32), "vf_preds": np.array([0.5, 0.5], np.float32)}
    )
    out = compute_advantages(batch, 2.0, 0.9, 1.0, use_gae=True)
    # targets = discounted returns bootstrapped with last_r: [1 + .9 * (1 + .9 * 2), 1 + .9 * 2]
    np.testing.assert_allclose(out[Postprocessing.VALUE_TARGETS], [3.52, 2.8], rtol=1e-5)
    np.testing.assert_allclose(out[Postprocessing.ADVANTAGES], [3.02, 2.3], rtol=1e-5)
    out = compute_advantages(
        SampleBatch({"rewards": np.ones(2)}), 0.0, 1.0, use_gae=False, use_critic=False
    )
    np.testing.assert_allclose(out["advantages"], [2.0, 1.0])
    # RLlib 1.13's keywords and default gamma (0.9).
    out = compute_advantages(
        rollout=SampleBatch({"rewards": np.ones(2)}), last_r=1.0, use_gae=False, use_critic=False
    )
    np.testing.assert_allclose(out["advantages"], [1.0 + 0.9 * 1.9, 1.9])
    assert Postprocessing.ADVANTAGES == "advantages"
    assert callable(adjust_nstep)


class EpisodeChecks(DefaultCallbacks):
    seen: list = []

    def on_episode_end(self, *, worker, episode, **kwargs):
        batches = episode.batch_builder.policy_collectors["default_policy"].batches
        EpisodeChecks.seen.append(
            ("end", bool(batches[-1]["dones"][-1]), worker.policy_config["batch_mode"])
        )

    def on_postprocess_trajectory(self, *, episode, original_batches, agent_id, **kwargs):
        policy, batch = original_batches[agent_id]
        EpisodeChecks.seen.append(("post", episode is not None, type(batch).__name__))
        if episode is not None:
            episode.custom_metrics["num_batches"] = 1


def test_single_agent_episode_in_postprocess_and_batch_builder():
    EpisodeChecks.seen = []
    trainer = PGTrainer(config={**BASE, "callbacks": EpisodeChecks, "train_batch_size": 200})
    try:
        result = trainer.train()
    finally:
        trainer.stop()
    ends = [s for s in EpisodeChecks.seen if s[0] == "end"]
    posts = [s for s in EpisodeChecks.seen if s[0] == "post"]
    assert ends and all(done and mode == "truncate_episodes" for _, done, mode in ends)
    assert posts and all(has_episode and kind == "SampleBatch" for _, has_episode, kind in posts)
    assert "num_batches_mean" in result["custom_metrics"]


def test_default_on_postprocess_trajectory_is_a_no_op():
    DefaultCallbacks().on_postprocess_trajectory(
        worker=None,
        episode=None,
        agent_id="a",
        policy_id="p",
        policies={},
        postprocessed_batch=SampleBatch({"obs": np.zeros(1)}),
        original_batches={},
    )


Two = make_multi_agent("CartPole-v1")
SHAPES: list = []


def _record_other_batches(policy, sample_batch, other_agent_batches=None, episode=None):
    SHAPES.append({k: tuple(type(x).__name__ for x in v) for k, v in other_agent_batches.items()})
    return sample_batch


def test_other_agent_batches_are_policy_batch_pairs():
    from corral.agents.pg.pg_torch_policy import PGTorchPolicy

    Recording = PGTorchPolicy.with_updates(
        name="Recording",
        postprocess_fn=lambda p, b, o=None, e=None: PGTorchPolicy.postprocess_trajectory(
            p, _record_other_batches(p, b, o, e), o, e
        ),
    )
    SHAPES.clear()
    config = {
        **BASE,
        "env": Two,
        "env_config": {"num_agents": 2},
        "train_batch_size": 40,
        "multiagent": {
            "policies": {"p": (Recording, None, None, {})},
            "policy_mapping_fn": lambda *a, **k: "p",
        },
    }
    trainer = PGTrainer(config=config)
    try:
        trainer.train()
    finally:
        trainer.stop()
    assert SHAPES and all(
        shape == ("Recording", "SampleBatch") for d in SHAPES for shape in d.values()
    )


@pytest.mark.parametrize("scope", ["all", "last", "avg", "last-5-avg"])
def test_tune_scope_metric_analysis_and_best_checkpoint(tmp_path, scope):
    from corral import tune
    from corral.tune.logger import pretty_print

    config = {
        **BASE,
        "train_batch_size": 40,
        "sgd_minibatch_size": 20,
        "num_sgd_iter": 1,
        "lr": tune.grid_search([0.01, 0.001]),
    }
    analysis = tune.run(
        PPOTrainer,
        config=config,
        stop={"training_iteration": 2},
        checkpoint_freq=1,
        local_dir=str(tmp_path),
        verbose=0,
    )
    metric = "episodes_this_iter"
    best = analysis.get_best_trial(metric=metric, mode="min", scope=scope)
    assert best is not None
    assert set(best.metric_analysis[metric]) >= {"min", "max", "avg", "last"}
    ckpt = analysis.get_best_checkpoint(
        best, metric="info/learner/default_policy/learner_stats/policy_loss", mode="min"
    )
    assert ckpt in [p for p, _ in analysis.get_trial_checkpoints_paths(best)]
    assert "episode_reward_mean" in pretty_print(best.last_result)


@pytest.mark.parametrize("trainer_cls", [PGTrainer, "DQN"])
def test_a_single_agent_env_acts_with_the_policy_the_mapping_names(trainer_cls):
    from corral.agents.registry import get_trainer_class
    from corral.policy.policy import PolicySpec

    cls = get_trainer_class(trainer_cls) if isinstance(trainer_cls, str) else trainer_cls
    config = {
        **BASE,
        "num_workers": 1,
        "multiagent": {
            "policies": {"main": PolicySpec()},
            "policy_mapping_fn": lambda agent_id, episode, worker, **kw: "main",
        },
    }
    trainer = cls(config={**config, "observation_filter": "MeanStdFilter"})
    try:
        # Each sampling worker filters with the named policy's filter.
        assert trainer.workers.foreach_worker(
            lambda w: w.sampler is None or w.sampler.obs_filter is w.filters["main"]
        ) == [True, True]
        result = trainer.train()
        assert list(result["info"]["learner"]) == ["main"]
        assert result["policy_reward_mean"] == {"main": result["episode_reward_mean"]}
        assert trainer.compute_single_action([0.0] * 4, policy_id="main") in (0, 1)
    finally:
        trainer.stop()
    config["multiagent"]["policy_mapping_fn"] = lambda agent_id, *args, **kw: "elsewhere"
    with pytest.raises(ValueError, match="returned 'elsewhere'"):
        cls(config={**config, "num_workers": 0})


class PreviousStep(DefaultCallbacks):
    """Records, at each step, RLlib 1.13's previous-step views of the episode."""

    seen: list = []

    def on_episode_step(self, *, worker, base_env, episode, env_index=None, **kwargs):
        PreviousStep.seen.append(
            (
                episode.length,
                episode.last_action_for(),
                episode.prev_action_for(),
                episode.last_reward_for(),
                episode.prev_reward_for(),
                episode.get_agents(),
            )
        )


def test_episode_previous_action_and_reward():
    PreviousStep.seen = []
    trainer = PGTrainer(config={**BASE, "callbacks": PreviousStep, "train_batch_size": 20})
    try:
        trainer.train()
    finally:
        trainer.stop()
    first, second, *_ = PreviousStep.seen
    assert first[2] == 0 and first[4] == 0.0  # nothing before the first step
    assert second[2] == first[1] and second[4] == first[3]  # the step before
    assert first[5] == ["agent0"]


class LastStep(DefaultCallbacks):
    """Records RLlib 1.13's last-step views of the episode: extra action outputs, the
    done flag and the recurrent state."""

    steps: list = []
    ends: list = []
    checked: list = []

    def on_episode_step(self, *, worker, base_env, episode, env_index=None, **kwargs):
        for agent in episode.get_agents():
            LastStep.steps.append(
                (agent, episode.last_extra_action_outs_for(agent), episode.last_done_for(agent))
            )

    def on_episode_end(self, *, worker, base_env, policies, episode, env_index=None, **kwargs):
        LastStep.ends.append(
            [(episode.last_done_for(a), episode.rnn_state_for(a)) for a in episode.get_agents()]
        )

    def on_postprocess_trajectory(
        self, *, worker, episode, agent_id, policy_id, policies, postprocessed_batch, **kw
    ):
        outs = episode.last_pi_info_for(agent_id)
        LastStep.checked.append(
            np.isclose(outs["action_logp"], postprocessed_batch["action_logp"][-1])
        )


@pytest.mark.parametrize("use_lstm", [False, True], ids=["mlp", "lstm"])
def test_episode_last_extra_action_outs_done_and_rnn_state(use_lstm):
    LastStep.steps, LastStep.ends, LastStep.checked = [], [], []
    model = {"use_lstm": True, "lstm_cell_size": 8, "max_seq_len": 10} if use_lstm else {}
    trainer = PPOTrainer(
        config={
            **BASE,
            "callbacks": LastStep,
            "train_batch_size": 200,
            "sgd_minibatch_size": 50,
            "num_sgd_iter": 1,
            "model": model,
        }
    )
    try:
        trainer.train()
    finally:
        trainer.stop()
    assert LastStep.steps and LastStep.ends and all(LastStep.checked)
    agent, outs, done = LastStep.steps[0]
    assert agent == "agent0" and {"action_logp", "vf_preds", "action_dist_inputs"} <= set(outs)
    assert not any(k.startswith("state_out") for k in outs)
    assert not done  # the first step of a CartPole episode does not end it
    for ((done, state),) in LastStep.ends:
        assert done
        assert [np.shape(s) for s in state] == ([(8,), (8,)] if use_lstm else [])


def test_episode_last_step_views_in_a_multi_agent_env():
    LastStep.steps, LastStep.ends, LastStep.checked = [], [], []
    trainer = PPOTrainer(
        config={
            **BASE,
            "env": make_multi_agent("CartPole-v1"),
            "env_config": {"num_agents": 2},
            "callbacks": LastStep,
            "train_batch_size": 200,
            "sgd_minibatch_size": 50,
            "num_sgd_iter": 1,
        }
    )
    try:
        trainer.train()
    finally:
        trainer.stop()
    assert {agent for agent, _, _ in LastStep.steps} == {0, 1}
    assert all("action_logp" in outs for _, outs, _ in LastStep.steps)
    assert all(done for end in LastStep.ends for done, _ in end)
    assert all(state == [] for end in LastStep.ends for _, state in end)
    assert LastStep.checked and all(LastStep.checked)


def test_rllib_1_13_keyword_signatures_of_trainer_helpers(caplog):
    import logging

    from corral.agents.pg import DEFAULT_CONFIG, PGTrainer
    from corral.agents.registry import get_trainer_class
    from corral.evaluation.postprocessing import compute_gae_for_sample_batch

    cls, config = get_trainer_class(alg="PG", return_config=True)
    assert cls is PGTrainer and config == DEFAULT_CONFIG
    trainer = PGTrainer(
        env="CartPole-v1",
        config={"num_workers": 0, "evaluation_num_workers": 0, "train_batch_size": 100},
    )
    try:
        # `duration_fn(units done) -> units left`, asked after each sampled batch
        # (whose episodes all count, as in RLlib): nothing when it says 0 at once.
        asked: list[int] = []
        evaluation = trainer.evaluate(duration_fn=lambda done: asked.append(done) or 3 - done)
        assert asked[0] == 0 and asked[-1] == evaluation["evaluation"]["episodes_this_iter"] >= 3
        assert trainer.evaluate(duration_fn=lambda done: 0)["evaluation"]["episodes_this_iter"] == 0
        with caplog.at_level(logging.WARNING):
            evaluation = trainer.evaluate(episodes_left_fn=lambda done: 0)["evaluation"]
        assert evaluation["episodes_this_iter"] == 0 and "duration_fn" in caplog.text
        batch = trainer.workers.local_worker().sample()
        policy = trainer.get_policy()
        policy.config = {**policy.config, "lambda": 1.0, "use_gae": False, "use_critic": False}
        out = compute_gae_for_sample_batch(policy, batch, other_agent_batches=None, episode=None)
        assert out["advantages"].shape == batch["rewards"].shape
    finally:
        trainer.stop()


class MaskedChoice(gymnasium.Env):
    """Dict observations with an action mask (RLlib's parametric-actions shape)."""

    def __init__(self, config=None):
        self.observation_space = gymnasium.spaces.Dict(
            {
                "action_mask": gymnasium.spaces.Box(0.0, 1.0, (3,), np.float32),
                "pos": gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32),
            }
        )
        self.action_space = gymnasium.spaces.Discrete(3)
        self.t = 0

    def _obs(self):
        return {
            "action_mask": np.array([0.0, 1.0, 1.0], np.float32),
            "pos": np.zeros(2, np.float32),
        }

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        assert action != 0, "a masked action was taken"
        self.t += 1
        return self._obs(), 1.0, self.t >= 5, False, {}


def test_a_policy_of_one_s_own_samples_single_agent():
    # RLlib 1.13's random_parametric_agent example: a `Policy` with only RLlib's
    # `compute_actions` (no model, no preprocessor of its own), restoring the Dict
    # observations from the flat rows against its own (Dict) observation space.
    from corral.agents.trainer import Trainer, with_common_config
    from corral.execution.rollout_ops import synchronous_parallel_sample
    from corral.models.modelv2 import restore_original_dimensions
    from corral.policy.policy import Policy

    class LegalRandom(Policy):
        def compute_actions(self, obs_batch, state_batches=None, **kwargs):
            obs = restore_original_dimensions(
                np.array(obs_batch, np.float32), self.observation_space, tensorlib=np
            )
            legal = [int(np.flatnonzero(mask)[0]) for mask in obs["action_mask"]]
            return legal, [], {}

    class LegalRandomTrainer(Trainer):
        @classmethod
        def get_default_config(cls):
            return with_common_config({"_disable_execution_plan_api": True})

        def get_default_policy_class(self, config):
            return LegalRandom

        def training_step(self):
            return {"sampled": synchronous_parallel_sample(worker_set=self.workers).count}

    trainer = LegalRandomTrainer(
        env=MaskedChoice, config={"num_workers": 0, "rollout_fragment_length": 10}
    )
    try:
        batch = trainer.workers.local_worker().sample()
        assert batch.count == 10 and set(batch["actions"].tolist()) == {1}
        assert trainer.train()["episodes_this_iter"] >= 1
    finally:
        trainer.stop()
