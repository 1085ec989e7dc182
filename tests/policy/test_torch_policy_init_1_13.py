"""RLlib 1.13's `TorchPolicy.__init__` keywords in hand-written subclasses: a model of one's
own (`model=`, `action_distribution_class=`), `loss=`, `action_sampler_fn=` /
`action_distribution_fn=`, `max_seq_len=`, `get_batch_divisibility_req=`; the subclass acts,
learns on batches, trains inside trainers and round-trips checkpoints."""

from __future__ import annotations

import inspect

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.pg import PGTrainer
from corral.agents.pg.pg import DEFAULT_CONFIG as PG_CONFIG
from corral.agents.pg.pg import sample_and_train_once
from corral.agents.pg.pg_torch_policy import PGTorchPolicy
from corral.agents.trainer_template import build_trainer
from corral.evaluation.postprocessing import Postprocessing, compute_advantages
from corral.models import ModelCatalog
from corral.models.torch.torch_action_dist import TorchCategorical
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_policy import TorchPolicy
from tests.fixtures.configs import SMALL_CARTPOLE

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACT_SPACE = gym.spaces.Discrete(2)
CONFIG = SMALL_CARTPOLE


def reinforce_loss(policy, model, dist_class, train_batch):
    """RLlib 1.13's form of a loss function: -E[log pi(a|s) * advantage]."""
    policy.loss_rows.append(len(train_batch[SampleBatch.OBS]))
    logits, _ = model(train_batch)
    logp = dist_class(logits, model).logp(train_batch[SampleBatch.ACTIONS])
    return -torch.mean(logp * train_batch[Postprocessing.ADVANTAGES])


class OwnModelPolicy(TorchPolicy):
    """As RLlib 1.x users wrote them: the model and distribution from the catalog, the loss
    a function, all given to `TorchPolicy.__init__`."""

    def __init__(self, observation_space, action_space, config, **init_kwargs):
        config = dict(PG_CONFIG, **config)
        dist_class, logit_dim = ModelCatalog.get_action_dist(
            action_space, config["model"], framework="torch"
        )
        self.own_model = ModelCatalog.get_model_v2(
            observation_space, action_space, logit_dim, config["model"], framework="torch"
        )
        self.loss_rows: list[int] = []
        TorchPolicy.__init__(
            self,
            observation_space,
            action_space,
            config,
            model=self.own_model,
            loss=reinforce_loss,
            action_distribution_class=dist_class,
            **init_kwargs,
        )

    def postprocess_trajectory(self, sample_batch, other_agent_batches=None, episode=None):
        return compute_advantages(
            sample_batch, 0.0, self.config["gamma"], use_gae=False, use_critic=False
        )


def flat_weights(policy) -> np.ndarray:
    return np.concatenate([w.ravel() for w in policy.get_weights().values()])


def cartpole_batch(policy, n: int = 10) -> SampleBatch:
    rng = np.random.default_rng(0)
    batch = SampleBatch(
        {
            SampleBatch.OBS: rng.uniform(-0.05, 0.05, (n, 4)).astype(np.float32),
            SampleBatch.ACTIONS: rng.integers(0, 2, n),
            SampleBatch.REWARDS: np.ones(n, np.float32),
            SampleBatch.DONES: np.arange(n) == n - 1,
            SampleBatch.EPS_ID: np.zeros(n, np.int64),
        }
    )
    return policy.postprocess_trajectory(batch)


class OwnModelTrainer(PGTrainer):
    def get_default_policy_class(self, config):
        return OwnModelPolicy


# -- model, action_distribution_class, loss -------------------------------------------------


def test_own_model_acts_and_learn_on_batch_updates_it():
    policy = OwnModelPolicy(OBS_SPACE, ACT_SPACE, {})
    assert policy.model is policy.own_model
    assert policy.dist_class is TorchCategorical
    obs = np.zeros((3, 4), np.float32)
    actions, state, extra = policy.compute_actions(obs)
    assert actions.shape == (3,) and state == []
    logits, _ = policy.own_model({SampleBatch.OBS: torch.as_tensor(obs)})
    np.testing.assert_allclose(extra[SampleBatch.ACTION_DIST_INPUTS], logits.detach(), atol=1e-6)

    before = flat_weights(policy)
    # RLlib 1.13's parameter name (and positional calls).
    assert "postprocessed_batch" in inspect.signature(TorchPolicy.learn_on_batch).parameters
    info = policy.learn_on_batch(postprocessed_batch=cartpole_batch(policy))
    assert policy.loss_rows == [10]
    assert np.isfinite(info["learner_stats"]["total_loss"])
    assert info["num_agent_steps_trained"] == 10
    after = flat_weights(policy)
    assert not np.allclose(before, after)
    policy.learn_on_batch(cartpole_batch(policy))
    assert not np.allclose(after, flat_weights(policy))


def test_action_distribution_class_replaces_the_catalogs_without_a_model():
    class Greedy(TorchCategorical):
        def sample(self):
            return self.deterministic_sample()

    class GreedyPolicy(TorchPolicy):
        def __init__(self, observation_space, action_space, config):
            super().__init__(
                observation_space,
                action_space,
                dict(PG_CONFIG, **config),
                loss=reinforce_loss,
                action_distribution_class=Greedy,
            )

    policy = GreedyPolicy(OBS_SPACE, ACT_SPACE, {})
    assert policy.dist_class is Greedy
    obs = np.random.default_rng(1).normal(size=(16, 4)).astype(np.float32)
    actions, _, extra = policy.compute_actions(obs, explore=True)
    np.testing.assert_array_equal(actions, extra[SampleBatch.ACTION_DIST_INPUTS].argmax(-1))


def test_learns_cartpole_in_a_trainer_subclass():
    trainer = OwnModelTrainer(
        config={
            **CONFIG,
            "train_batch_size": 500,
            "rollout_fragment_length": 500,
            "batch_mode": "complete_episodes",
            "lr": 0.01,
        }
    )
    try:
        policy = trainer.get_policy()
        assert type(policy) is OwnModelPolicy
        rewards = [trainer.train()["episode_reward_mean"] for _ in range(16)]
        assert policy.loss_rows, "the trainer trained through the given loss"
        assert policy.model is policy.own_model
    finally:
        trainer.stop()
    # (Seeds 0-4 go from 21-26 to 60-75.)
    assert np.mean(rewards[-3:]) > np.mean(rewards[:3]) + 25, rewards


def test_with_updates_default_policy_trains_and_checkpoints_round_trip(tmp_path):
    MyPG = build_trainer(
        "MyPG",
        default_config=PG_CONFIG,
        default_policy=PGTorchPolicy,
        training_step=sample_and_train_once,
    )
    OwnPG = MyPG.with_updates(default_policy=OwnModelPolicy)
    trainer = OwnPG(config=CONFIG)
    try:
        initial = flat_weights(trainer.get_policy())
        for _ in range(2):
            result = trainer.train()
        assert "total_loss" in result["info"]["learner"]["default_policy"]["learner_stats"]
        trained = flat_weights(trainer.get_policy())
        assert not np.allclose(initial, trained)
        checkpoint = trainer.save(str(tmp_path))
    finally:
        trainer.stop()
    restored = OwnPG(config={**CONFIG, "seed": 1})
    try:
        assert not np.allclose(flat_weights(restored.get_policy()), trained)
        restored.restore(checkpoint)
        policy = restored.get_policy()
        np.testing.assert_allclose(flat_weights(policy), trained)
        assert policy.model is policy.own_model
        restored.train()  # and trains on from there
        assert not np.allclose(flat_weights(policy), trained)
    finally:
        restored.stop()


def test_with_updates_functions_win_over_the_init_keywords():
    calls = []

    def other_loss(policy, model, dist_class, train_batch):
        calls.append(len(train_batch[SampleBatch.OBS]))
        logits, _ = model(train_batch)
        return -dist_class(logits, model).entropy().mean()

    Updated = OwnModelPolicy.with_updates(loss_fn=other_loss)
    policy = Updated(OBS_SPACE, ACT_SPACE, {})
    policy.learn_on_batch(cartpole_batch(policy))
    assert calls == [10] and policy.loss_rows == []
    # Without a loss_fn, the class's instances keep the loss their __init__ gives them.
    Kept = OwnModelPolicy.with_updates(stats_fn=lambda policy, batch: {"rows": 1.0})
    kept = Kept(OBS_SPACE, ACT_SPACE, {})
    info = kept.learn_on_batch(cartpole_batch(kept))
    assert kept.loss_rows == [10] and info["learner_stats"]["rows"] == 1.0


# -- action_sampler_fn / action_distribution_fn ---------------------------------------------


def greedy_sampler(policy, model, input_dict, state_batches, explore, timestep):
    """RLlib 1.13's `action_sampler_fn`: the model, then the most likely action."""
    policy.sampler_calls += 1
    logits, state_out = model(input_dict, state_batches, None)
    dist = TorchCategorical(logits, model)
    actions = dist.deterministic_sample()
    return actions, dist.logp(actions), logits, state_out


def categorical_loss(policy, model, dist_class, train_batch):
    # (dist_class is None: the sampler function picks the actions.)
    return reinforce_loss(policy, model, TorchCategorical, train_batch)


class SamplerPolicy(OwnModelPolicy):
    """A model without a distribution class: `action_sampler_fn` acts when the config
    asks for it (RLlib 1.13's keywords come per instance)."""

    def __init__(self, observation_space, action_space, config):
        config = dict(PG_CONFIG, **config)
        self.sampler_calls = 0
        self.loss_rows = []
        _, logit_dim = ModelCatalog.get_action_dist(
            action_space, config["model"], framework="torch"
        )
        self.own_model = ModelCatalog.get_model_v2(
            observation_space, action_space, logit_dim, config["model"], framework="torch"
        )
        hooks = (
            {"action_sampler_fn": greedy_sampler}
            if config.get("greedy_sampler", True)
            else {"action_distribution_class": TorchCategorical}
        )
        TorchPolicy.__init__(
            self,
            observation_space,
            action_space,
            config,
            model=self.own_model,
            loss=categorical_loss,
            **hooks,
        )


def test_action_sampler_fn_acts_and_trains_in_a_trainer():
    class SamplerTrainer(PGTrainer):
        def get_default_policy_class(self, config):
            return SamplerPolicy

    trainer = SamplerTrainer(config=CONFIG)
    try:
        policy = trainer.get_policy()
        assert policy.dist_class is None and policy.action_sampler_fn is greedy_sampler
        batch = trainer.workers.local_worker().sample()
        assert policy.sampler_calls >= batch.count
        # The sampler's greedy actions and RLlib 1.13's fetches of that path.
        np.testing.assert_array_equal(
            batch[SampleBatch.ACTIONS], batch[SampleBatch.ACTION_DIST_INPUTS].argmax(-1)
        )
        np.testing.assert_allclose(
            batch[SampleBatch.ACTION_PROB], np.exp(batch[SampleBatch.ACTION_LOGP]), rtol=1e-5
        )
        before = flat_weights(policy)
        trainer.train()
        assert policy.loss_rows and not np.allclose(before, flat_weights(policy))
        calls = policy.sampler_calls
        action = trainer.compute_single_action(np.zeros(4, np.float32))
        assert action in (0, 1) and policy.sampler_calls == calls + 1
        policy.to_device("cpu")  # (the hooked path moves its own inputs)
        policy.compute_actions(np.zeros((2, 4), np.float32))
    finally:
        trainer.stop()


def test_only_instances_given_acting_functions_take_the_hooked_path():
    hooked = SamplerPolicy(OBS_SPACE, ACT_SPACE, {"greedy_sampler": True})
    plain = SamplerPolicy(OBS_SPACE, ACT_SPACE, {"greedy_sampler": False})
    assert "compute_actions_from_obs" in vars(hooked)
    assert "compute_actions_from_obs" not in vars(plain)
    assert SamplerPolicy.compute_actions_from_obs is TorchPolicy.compute_actions_from_obs
    plain.compute_actions(np.zeros((2, 4), np.float32))
    assert plain.sampler_calls == 0 and plain.dist_class is TorchCategorical


def test_action_distribution_fn_gives_the_distribution():
    seen = []

    def dist_fn(
        policy, model, input_dict, *, state_batches, seq_lens, explore, timestep, is_training
    ):
        seen.append((explore, is_training))
        logits, state_out = model(input_dict, state_batches, seq_lens)
        return logits * 100.0, TorchCategorical, state_out

    class DistFnPolicy(TorchPolicy):
        def __init__(self, observation_space, action_space, config):
            config = dict(PG_CONFIG, **config)
            model = ModelCatalog.get_model_v2(
                observation_space, action_space, 2, config["model"], framework="torch"
            )
            super().__init__(
                observation_space,
                action_space,
                config,
                model=model,
                loss=categorical_loss,
                action_distribution_fn=dist_fn,
            )

    policy = DistFnPolicy(OBS_SPACE, ACT_SPACE, {})
    obs = np.random.default_rng(2).normal(size=(5, 4)).astype(np.float32)
    _, _, extra = policy.compute_actions(obs, explore=False)
    logits, _ = policy.model({SampleBatch.OBS: torch.as_tensor(obs)})
    np.testing.assert_allclose(
        extra[SampleBatch.ACTION_DIST_INPUTS], 100.0 * logits.detach().numpy(), rtol=1e-4
    )
    assert seen == [(False, False)]
    # Log-likelihoods are scored under the distribution it gives (RLlib 1.13's).
    actions = np.array([0, 1, 1, 0, 1])
    expected = TorchCategorical(100.0 * logits.detach(), policy.model).logp(torch.tensor(actions))
    got = policy.compute_log_likelihoods(actions, obs)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-4, atol=1e-4)


def test_log_likelihoods_need_a_distribution_beside_an_action_sampler_fn():
    policy = SamplerPolicy(OBS_SPACE, ACT_SPACE, {"greedy_sampler": True})
    with pytest.raises(ValueError, match="action_sampler_fn.*no action_distribution_fn"):
        policy.compute_log_likelihoods(np.array([0, 1]), np.zeros((2, 4), np.float32))


# -- max_seq_len, get_batch_divisibility_req --------------------------------------------------


@pytest.mark.parametrize("req", [4, lambda policy: 2 * policy.config["rollout_fragment_length"]])
def test_batch_divisibility_req_pads_the_train_batches(req):
    policy = OwnModelPolicy(
        OBS_SPACE,
        ACT_SPACE,
        {"rollout_fragment_length": 2},
        get_batch_divisibility_req=req,
        max_seq_len=7,
    )
    assert policy.batch_divisibility_req == 4
    assert policy.max_seq_len == 7 and policy.config["model"]["max_seq_len"] == 7
    info = policy.learn_on_batch(cartpole_batch(policy, n=10))
    assert policy.loss_rows == [12]  # 10 rows padded to whole chunks of 4
    assert np.isfinite(info["learner_stats"]["total_loss"])


def test_max_seq_len_defaults_to_the_model_configs():
    policy = OwnModelPolicy(OBS_SPACE, ACT_SPACE, {"model": {"max_seq_len": 9}})
    assert policy.max_seq_len == 9 and policy.batch_divisibility_req == 1


# -- bad combinations ---------------------------------------------------------------------------


def test_a_model_needs_a_distribution_class_or_an_acting_function():
    model = ModelCatalog.get_model_v2(OBS_SPACE, ACT_SPACE, 2, {}, framework="torch")
    config = dict(PG_CONFIG)
    with pytest.raises(ValueError, match="action_distribution_class"):
        TorchPolicy(OBS_SPACE, ACT_SPACE, config, model=model, loss=reinforce_loss)
    with pytest.raises(ValueError, match="not both"):
        TorchPolicy(
            OBS_SPACE,
            ACT_SPACE,
            config,
            model=model,
            action_sampler_fn=greedy_sampler,
            action_distribution_fn=lambda *a, **k: None,
        )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"get_batch_divisibility_req": 0}, "get_batch_divisibility_req = 0"),
        ({"get_batch_divisibility_req": lambda p: "4"}, "returned '4'"),
        ({"max_seq_len": 0}, "max_seq_len=0"),
        ({"max_seq_len": 2.5}, "max_seq_len=2.5"),
    ],
)
def test_bad_values_name_themselves(kwargs, match):
    with pytest.raises(ValueError, match=match):
        OwnModelPolicy(OBS_SPACE, ACT_SPACE, {}, **kwargs)
