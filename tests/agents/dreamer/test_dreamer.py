"""Dreamer: the world model's parts and losses, free nats, lambda-returns, the imagination's
gradients, the episode buffer, acting with the RSSM state, frames, checkpoints, config."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.dreamer import DEFAULT_CONFIG, DREAMERTrainer
from corral.agents.dreamer.dreamer import (
    DreamerIteration,
    EpisodicBuffer,
    total_sampled_timesteps,
)
from corral.agents.dreamer.dreamer_model import (
    RSSM,
    ActionDecoder,
    ConvDecoder,
    ConvEncoder,
    DenseDecoder,
    DreamerModel,
)
from corral.agents.dreamer.dreamer_torch_policy import (
    LOG_GIF,
    compute_dreamer_loss,
    lambda_return,
    log_summary,
    preprocess_episode,
)
from corral.agents.dreamer.utils import FreezeParameters
from corral.agents.registry import get_trainer_class
from corral.models.torch.modules.convtranspose2d_stack import ConvTranspose2DStack
from corral.policy.sample_batch import SampleBatch
from corral.utils.error import UnsupportedSpaceException
from tests.fixtures.pixel_point import PixelPoint

TINY_MODEL = {"deter_size": 16, "stoch_size": 4, "depth_size": 2, "hidden_size": 16}
TINY = {
    "env_config": {"frame_skip": 1, "episode_len": 10},
    "horizon": None,
    "prefill_timesteps": 20,
    "dreamer_train_iters": 2,
    "batch_size": 3,
    "batch_length": 5,
    "imagine_horizon": 3,
    "rollout_fragment_length": 10,
    "seed": 0,
    "dreamer_model": TINY_MODEL,
}
IMAGE = gym.spaces.Box(0, 255, (3, 64, 64), np.uint8)
ACTION = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def _model(obs_space: gym.Space = IMAGE, action_space: gym.Space = ACTION) -> DreamerModel:
    torch.manual_seed(0)
    config = {**DEFAULT_CONFIG["dreamer_model"], **TINY_MODEL}
    return DreamerModel(obs_space, action_space, 1, config, "dreamer")


def _chunks(b: int = 2, t: int = 4, action_size: int = 2) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(1)
    obs = torch.rand(b, t, 3, 64, 64, generator=g) - 0.5
    action = 2 * torch.rand(b, t, action_size, generator=g) - 1
    reward = torch.randn(b, t, generator=g)
    return obs, action, reward


def _trainer(**overrides) -> DREAMERTrainer:
    return DREAMERTrainer(config={**TINY, **overrides}, env=PixelPoint)


# -- defaults and registry ------------------------------------------------------------------


def test_registry_and_rllib_defaults():
    assert get_trainer_class("DREAMER") is DREAMERTrainer
    expected = {
        "td_model_lr": 6e-4,
        "actor_lr": 8e-5,
        "critic_lr": 8e-5,
        "grad_clip": 100.0,
        "discount": 0.99,
        "lambda": 0.95,
        "dreamer_train_iters": 100,
        "horizon": 1000,
        "batch_size": 50,
        "batch_length": 50,
        "imagine_horizon": 15,
        "free_nats": 3.0,
        "kl_coeff": 1.0,
        "prefill_timesteps": 5000,
        "explore_noise": 0.3,
        "batch_mode": "complete_episodes",
    }
    assert {k: DEFAULT_CONFIG[k] for k in expected} == expected
    assert DEFAULT_CONFIG["dreamer_model"]["custom_model"] is DreamerModel
    assert DEFAULT_CONFIG["dreamer_model"]["deter_size"] == 200
    assert DEFAULT_CONFIG["env_config"]["frame_skip"] == 2


# -- the networks -------------------------------------------------------------------------------


def test_encoder_decoder_and_heads_shapes():
    obs, action, _ = _chunks()
    encoder = ConvEncoder(depth=2)
    embed = encoder(obs)
    assert embed.shape == (2, 4, 32 * 2) == (2, 4, encoder.embed_size)
    decoder = ConvDecoder(10, depth=2)
    frames = decoder(torch.zeros(2, 4, 10))
    assert frames.mean.shape == (2, 4, 3, 64, 64)
    assert frames.log_prob(obs).shape == (2, 4)  # one log-density per frame
    reward = DenseDecoder(10, 1, 2, 8)(torch.zeros(2, 4, 10))
    assert reward.mean.shape == (2, 4)
    actor = ActionDecoder(10, 2, 4, 8)
    dist = actor(torch.randn(5, 10))
    sample = dist.sample()
    assert sample.shape == (5, 2) and bool((sample.abs() <= 1).all())
    assert dist.log_prob(sample).shape == (5,) and bool(torch.isfinite(dist.log_prob(sample)).all())


def test_convtranspose2d_stack_is_dreamers_decoder_and_checks_its_output_shape():
    stack = ConvTranspose2DStack(input_size=7)  # RLlib's defaults: depth 32, 3 x 64 x 64
    assert stack(torch.zeros(2, 3, 7)).mean.shape == (2, 3, 3, 64, 64)
    with pytest.raises(ValueError, match="produce 64 x 64 images, not the output_shape"):
        ConvTranspose2DStack(input_size=7, output_shape=(3, 42, 42))


def test_rssm_observe_and_imagine_shapes():
    rssm = RSSM(action_size=2, embed_size=6, stoch=4, deter=5, hidden=8)
    embed, action = torch.randn(3, 7, 6), torch.randn(3, 7, 2)
    post, prior = rssm.observe(embed, action)
    for state in (post, prior):
        assert [tuple(s.shape) for s in state] == [(3, 7, 4), (3, 7, 4), (3, 7, 4), (3, 7, 5)]
        assert bool((state[1] > 0.1).all())  # std = softplus + 0.1
    # The posterior shares the prior's deterministic state at every step.
    torch.testing.assert_close(post[3], prior[3])
    assert rssm.get_feature(post).shape == (3, 7, 9)
    imagined = rssm.imagine(torch.randn(3, 4, 2), [s[:, -1] for s in post])
    assert [tuple(s.shape) for s in imagined] == [(3, 4, 4), (3, 4, 4), (3, 4, 4), (3, 4, 5)]


def test_frames_are_scaled_into_the_model_range_whatever_their_layout_and_size():
    frame = np.full((42, 42, 3), 255, np.uint8)
    frame[0, 0] = 0
    hwc = _model(gym.spaces.Box(0, 255, (42, 42, 3), np.uint8), ACTION)
    x = hwc.preprocess_obs(torch.as_tensor(frame)[None])
    assert x.shape == (1, 3, 64, 64)
    assert float(x.max()) == pytest.approx(0.5) and float(x.min()) >= -0.5
    dmc = _model(gym.spaces.Box(-0.5, 0.5, (3, 64, 64), np.float32), ACTION)
    frames = torch.rand(2, 5, 3, 64, 64) - 0.5
    torch.testing.assert_close(dmc.preprocess_obs(frames), frames)


def test_model_policy_step_carries_the_state():
    model = _model()
    obs = torch.randint(0, 256, (4, 3, 64, 64), dtype=torch.uint8)
    action, logp, state = model.policy(obs, None, explore=True)
    assert action.shape == (4, 2) and logp.shape == (4,)
    assert [tuple(s.shape) for s in state] == [(4, 4), (4, 4), (4, 4), (4, 16), (4, 2)]
    torch.testing.assert_close(state[4], action)
    assert [tuple(s.shape) for s in model.get_initial_state()] == [(4,), (4,), (4,), (16,), (2,)]


# -- the losses ----------------------------------------------------------------------------------


def test_world_model_losses_are_the_gaussian_negative_log_likelihoods():
    model = _model()
    obs, action, reward = _chunks()
    torch.manual_seed(5)
    out = compute_dreamer_loss(obs, action, reward, model, imagine_horizon=3, free_nats=0.0)
    torch.manual_seed(5)  # the same posterior samples, by hand
    post, prior = model.dynamics.observe(model.encoder(obs), action)
    feat = model.dynamics.get_feature(post)
    half_log_2pi = 0.5 * math.log(2 * math.pi)
    image_nll = (0.5 * (obs - model.decoder(feat).mean) ** 2 + half_log_2pi).sum((2, 3, 4))
    reward_nll = 0.5 * (reward - model.reward(feat).mean) ** 2 + half_log_2pi
    kl = torch.distributions.kl_divergence(
        torch.distributions.Normal(post[0], post[1]), torch.distributions.Normal(prior[0], prior[1])
    )
    torch.testing.assert_close(out["image_loss"], image_nll.mean())
    torch.testing.assert_close(out["reward_loss"], reward_nll.mean())
    torch.testing.assert_close(out["divergence"], kl.sum(-1).mean())
    torch.testing.assert_close(
        out["model_loss"], out["divergence"] + out["reward_loss"] + out["image_loss"]
    )
    for name in ("actor_loss", "critic_loss", "prior_ent", "post_ent"):
        assert out[name].shape == () and bool(torch.isfinite(out[name]))


def test_kl_term_with_free_nats():
    model = _model()
    obs, action, reward = _chunks()
    dynamics = list(model.dynamics.parameters())

    def divergence(free_nats: float) -> tuple[float, list]:
        torch.manual_seed(3)
        out = compute_dreamer_loss(obs, action, reward, model, 3, free_nats=free_nats)
        grads = torch.autograd.grad(out["divergence"], dynamics, allow_unused=True)
        return float(out["divergence"].detach()), grads

    kl, grads = divergence(0.0)
    assert kl > 0 and any(g is not None and bool(g.abs().sum() > 0) for g in grads)
    # Above the KL: the term is the floor, and gives the world model no gradient.
    floor, grads = divergence(kl + 1.0)
    assert floor == pytest.approx(kl + 1.0)
    assert all(g is None or bool((g == 0).all()) for g in grads)
    # Below it: the KL itself.
    assert divergence(kl - 0.5)[0] == pytest.approx(kl)


def test_lambda_return_against_a_hand_computation():
    reward = torch.tensor([1.0, 2.0, 3.0])
    value = torch.tensor([0.5, 1.0, 1.5])
    bootstrap = torch.tensor(2.0)
    pcont = torch.full((3,), 0.9)
    # R_2 = 3 + 0.9 * 2 = 4.8; R_1 = 2 + 0.9 (0.2 * 1.5 + 0.8 * 4.8) = 5.726;
    # R_0 = 1 + 0.9 (0.2 * 1.0 + 0.8 * 5.726) = 5.30272.
    torch.testing.assert_close(
        lambda_return(reward, value, pcont, bootstrap, 0.8), torch.tensor([5.30272, 5.726, 4.8])
    )
    # lambda = 0: one-step TD targets; lambda = 1: discounted returns with the bootstrap.
    torch.testing.assert_close(
        lambda_return(reward, value, pcont, bootstrap, 0.0), torch.tensor([1.9, 3.35, 4.8])
    )
    full = 1 + 0.9 * 2 + 0.81 * 3 + 0.729 * 2
    assert float(lambda_return(reward, value, pcont, bootstrap, 1.0)[0]) == pytest.approx(full)
    # Batched: each column on its own.
    batched = lambda_return(
        torch.stack([reward, 2 * reward], 1),
        torch.stack([value, value], 1),
        torch.full((3, 2), 0.9),
        torch.stack([bootstrap, bootstrap]),
        0.8,
    )
    torch.testing.assert_close(batched[:, 0], torch.tensor([5.30272, 5.726, 4.8]))


def test_imagination_gradient_reaches_the_actor_but_not_the_world_model():
    model = _model()
    obs, action, reward = _chunks()
    out = compute_dreamer_loss(obs, action, reward, model, imagine_horizon=4)
    nets = {
        "world model": [
            p
            for n in (model.encoder, model.decoder, model.reward, model.dynamics)
            for p in n.parameters()
        ],
        "actor": list(model.actor.parameters()),
        "value": list(model.value.parameters()),
    }

    def trained(loss: torch.Tensor) -> set[str]:
        names, params = zip(*[(name, p) for name, ps in nets.items() for p in ps])
        grads = torch.autograd.grad(loss, params, allow_unused=True, retain_graph=True)
        return {n for n, g in zip(names, grads) if g is not None and bool(g.abs().sum() > 0)}

    assert trained(out["actor_loss"]) == {"actor"}
    assert trained(out["critic_loss"]) == {"value"}
    assert trained(out["model_loss"]) == {"world model"}
    assert all(p.requires_grad for ps in nets.values() for p in ps)  # unfrozen again


def test_freeze_parameters_restores_requires_grad():
    a, b = torch.nn.Parameter(torch.ones(1)), torch.nn.Parameter(torch.ones(1))
    b.requires_grad_(False)
    with FreezeParameters([a, b]):
        assert not a.requires_grad and not b.requires_grad
    assert a.requires_grad and not b.requires_grad


def test_log_summary_shape():
    model = _model()
    obs, action, _ = _chunks(b=2, t=7)
    embed = model.encoder(obs)
    post, _ = model.dynamics.observe(embed, action)
    video = log_summary(obs, action, embed, model.decoder(model.dynamics.get_feature(post)), model)
    assert video.shape == (2, 7, 3, 3 * 64, 64)


# -- the episode buffer --------------------------------------------------------------------------


def _episodes() -> SampleBatch:
    eps = np.array([7, 7, 7, 8, 8, 8, 8, 8])
    t = np.array([0, 1, 2, 0, 1, 2, 3, 4])
    return SampleBatch(
        {
            SampleBatch.OBS: (eps * 100 + t).astype(np.float32)[:, None],
            SampleBatch.NEXT_OBS: (eps * 100 + t + 1).astype(np.float32)[:, None],
            SampleBatch.ACTIONS: (eps * 10 + t).astype(np.float32)[:, None],
            SampleBatch.REWARDS: t.astype(np.float32),
            SampleBatch.EPS_ID: eps,
        }
    )


def test_preprocess_episode_pairs_each_frame_with_the_action_and_reward_before_it():
    episode = preprocess_episode(None, _episodes()[:3])
    np.testing.assert_array_equal(episode[SampleBatch.OBS][:, 0], [700, 701, 702, 703])
    np.testing.assert_array_equal(episode[SampleBatch.ACTIONS][:, 0], [0, 70, 71, 72])
    np.testing.assert_array_equal(episode[SampleBatch.REWARDS], [0, 0, 1, 2])
    np.testing.assert_array_equal(episode[SampleBatch.EPS_ID], [7, 7, 7, 7])


def test_episodic_buffer_samples_consecutive_chunks_of_long_enough_episodes():
    buffer = EpisodicBuffer(max_length=5, length=5, seed=0)
    buffer.add(_episodes())
    assert buffer.timesteps == 8 and [e.count for e in buffer.episodes] == [4, 6]
    chunks = buffer.sample(16)
    assert chunks[SampleBatch.OBS].shape == (16, 5, 1)
    assert chunks[SampleBatch.ACTIONS].shape == (16, 5, 1)
    assert chunks[SampleBatch.REWARDS].shape == (16, 5)
    obs = chunks[SampleBatch.OBS][:, :, 0]
    assert set(obs[:, 0]) == {800, 801}  # only episode 8 is 5 rows long; both starts drawn
    np.testing.assert_array_equal(np.diff(obs, axis=1), 1)
    with pytest.raises(ValueError, match="batch_length=9"):
        _buffer_with(9).sample(1)
    for _ in range(3):
        buffer.add(_episodes())
    assert len(buffer.episodes) == 5  # the oldest dropped


def _buffer_with(length: int) -> EpisodicBuffer:
    buffer = EpisodicBuffer(length=length)
    buffer.add(_episodes())
    return buffer


# -- the trainer -----------------------------------------------------------------------------


def test_trains_and_reports_the_losses_and_frames():
    trainer = _trainer(env_config={"frame_skip": 2, "episode_len": 10})
    try:
        result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        for name in ("model_loss", "image_loss", "reward_loss", "actor_loss", "critic_loss"):
            assert math.isfinite(stats[name]), name
        assert stats["divergence"] >= DEFAULT_CONFIG["free_nats"]
        # Frames: 2 per env step. Prefill (20 frames = 10 steps = one episode), then one
        # rollout of at least 10 env steps.
        assert result["timesteps_total"] == 2 * 20
        assert total_sampled_timesteps(trainer.workers.local_worker()) == 40
        # Both episodes stored (the rollout after the gradient steps, as RLlib's).
        assert trainer.episode_buffer.timesteps == 20
        assert len(trainer.episode_buffer.episodes) == 2
    finally:
        trainer.stop()


def test_horizon_counts_frames():
    trainer = _trainer(env_config={"frame_skip": 2, "episode_len": 100}, horizon=12)
    try:
        assert trainer.train()["episode_len_mean"] == 6  # 12 frames = 6 env steps
    finally:
        trainer.stop()


def test_prefill_acts_at_random_then_the_actor_acts_with_its_state():
    trainer = _trainer(prefill_timesteps=1000)
    policy = trainer.get_policy()
    obs = np.stack([PixelPoint().reset(seed=i)[0] for i in range(3)])
    try:
        actions, extra = policy.compute_actions_from_obs(obs, explore=True)
        assert actions.shape == (3, 1) and np.all(np.abs(actions) <= 1)
        for i, initial in enumerate(policy.get_initial_state()):  # the state stays initial
            np.testing.assert_array_equal(extra[f"state_out_{i}"], np.repeat(initial[None], 3, 0))
        policy.global_timestep = 1000  # the prefill is over: the actor (plus noise) acts
        actions, extra = policy.compute_actions_from_obs(obs, explore=True)
        assert np.any(extra["state_out_0"] != 0)  # the posterior after the frames
        np.testing.assert_array_equal(extra["state_out_4"], actions)  # the action executed
        action, state, _ = trainer.compute_single_action(
            obs[0], state=policy.get_initial_state(), explore=False
        )
        assert action.shape == (1,) and [s.shape for s in state] == [(4,), (4,), (4,), (16,), (1,)]
    finally:
        trainer.stop()


def test_same_seed_same_training():
    def losses() -> dict:
        trainer = _trainer()
        try:
            return trainer.train()["info"]["learner"]["default_policy"]["learner_stats"]
        finally:
            trainer.stop()

    assert losses() == losses()


def test_checkpoint_restore_gives_the_same_actions_networks_and_optimisers(tmp_path):
    obs = np.stack([PixelPoint().reset(seed=i)[0] for i in range(4)])

    def act(trainer: DREAMERTrainer) -> list:
        policy = trainer.get_policy()
        out = []
        for o in obs:
            torch.manual_seed(11)  # the posterior's sample
            out.append(trainer.compute_single_action(o, state=policy.get_initial_state())[0])
        return out

    trainer = _trainer()
    try:
        trainer.train()
        path = trainer.save(str(tmp_path))
        expected = act(trainer)
        weights = trainer.get_policy().get_weights()
        optimisers = trainer.learner_group.local_learner.get_state()["optimizers"]
    finally:
        trainer.stop()
    restored = _trainer(seed=5)
    try:
        restored.restore(path)
        np.testing.assert_array_equal(np.array(act(restored)), np.array(expected))
        restored_weights = restored.get_policy().get_weights()
        assert set(restored_weights) == set(weights)
        assert {k.split(".")[0] for k in weights} == {
            "encoder",
            "decoder",
            "reward",
            "dynamics",
            "actor",
            "value",
        }
        for k, v in weights.items():
            np.testing.assert_array_equal(restored_weights[k], v)
        state = restored.learner_group.local_learner.get_state()["optimizers"]["default_policy"]
        assert set(state) == {"model", "actor", "critic"}
        for name, opt in optimisers["default_policy"].items():
            for i, moments in opt["state"].items():
                for k, v in moments.items():
                    torch.testing.assert_close(state[name]["state"][i][k], v)
        # A restored trainer refills its (empty) buffer and trains on.
        assert math.isfinite(
            restored.train()["info"]["learner"]["default_policy"]["learner_stats"]["model_loss"]
        )
    finally:
        restored.stop()


# -- DreamerIteration's logging (RLlib 1.13's policy_stats and postprocess_gif) -------------


def _iteration(**kwargs) -> DreamerIteration:
    return DreamerIteration(None, EpisodicBuffer(), 1, 1, 1, learn=lambda b: None, **kwargs)


@pytest.mark.parametrize("as_tensor", [False, True])
def test_postprocess_gif_lays_the_videos_side_by_side_as_uint8(as_tensor):
    gif = np.random.default_rng(0).uniform(-0.2, 1.2, (2, 3, 3, 4, 5)).astype(np.float32)
    frames = _iteration().postprocess_gif(torch.from_numpy(gif) if as_tensor else gif)
    assert frames.shape == (1, 3, 3, 4, 10) and frames.dtype == np.uint8
    scaled = np.clip(255 * gif, 0, 255).astype(np.uint8)  # (out of range values clipped)
    for b in range(2):
        np.testing.assert_array_equal(frames[0, :, :, :, b * 5 : (b + 1) * 5], scaled[b])
    assert frames.min() == 0 and frames.max() == 255


def test_policy_stats_are_the_default_policys_learner_stats():
    stats = {"model_loss": 1.0}
    fetches = {"default_policy": {"learner_stats": stats, "num_agent_steps_trained": 3}}
    assert _iteration().policy_stats(fetches) is stats


def test_iteration_returns_the_loss_video_summary_postprocessed():
    trainer = _trainer(batch_length=7)
    try:
        worker = trainer.workers.local_worker()
        trainer.episode_buffer.add(trainer._sample())  # (one 10-step episode)

        def learn_with_video(chunks: SampleBatch) -> dict:
            chunks[LOG_GIF] = np.ones(chunks.count, bool)  # RLlib's switch of the summary
            return worker.learn_on_batch(chunks)

        iteration = DreamerIteration(
            worker, trainer.episode_buffer, 2, 3, 1, learn=learn_with_video
        )
        stats = iteration(trainer._sample())["default_policy"]["learner_stats"]
        # 3 chunks of 7 frames: true, predicted and error frames stacked along the height.
        assert stats[LOG_GIF].shape == (1, 7, 3, 3 * 64, 3 * 64)
        assert stats[LOG_GIF].dtype == np.uint8 and math.isfinite(stats["model_loss"])
        # Without the column, no video (and the plain learner stats).
        plain = DreamerIteration(worker, trainer.episode_buffer, 1, 3, 1)
        stats = plain(trainer._sample())["default_policy"]["learner_stats"]
        assert LOG_GIF not in stats and math.isfinite(stats["model_loss"])
    finally:
        trainer.stop()


# -- spaces and config ---------------------------------------------------------------------


class _SpacesEnv(gym.Env):
    def __init__(self, config: dict) -> None:
        self.observation_space = config["obs"]
        self.action_space = config["act"]

    def reset(self, *, seed=None, options=None):
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, True, {}


@pytest.mark.parametrize(
    ("obs", "act"),
    [
        (IMAGE, gym.spaces.Discrete(3)),
        (IMAGE, gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)),
        (IMAGE, gym.spaces.Box(-1.0, 1.0, (2, 2), np.float32)),
        (gym.spaces.Box(-1.0, 1.0, (4,), np.float32), ACTION),
        (gym.spaces.Box(0, 255, (64, 64, 8), np.uint8), ACTION),
    ],
)
def test_unsupported_spaces_are_named(obs, act):
    with pytest.raises(UnsupportedSpaceException) as err:
        DREAMERTrainer(config={**TINY, "env_config": {"obs": obs, "act": act}}, env=_SpacesEnv)
    assert str(obs) in str(err.value) or str(act) in str(err.value)


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"num_workers": 1}, "num_workers"),
        ({"batch_mode": "truncate_episodes"}, "batch_mode"),
        ({"clip_actions": True}, "clip_actions"),
        ({"imagine_horizon": 1}, "imagine_horizon"),
        ({"free_nats": -1.0}, "free_nats"),
        ({"dreamer_model": {"depth_size": 0}}, "dreamer_model.depth_size"),
        ({"dreamer_model": {"deter": 8}}, "deter"),
        ({"env_config": {"frame_skip": 0}}, "frame_skip"),
        ({"multiagent": {"policies": {"p0", "p1"}}}, "multiagent.policies"),
    ],
)
def test_bad_config_is_named_at_construction(overrides, named):
    with pytest.raises((ValueError, TypeError)) as err:
        _trainer(**overrides)
    assert named in str(err.value)


def test_from_checkpoint_rebuilds_the_saved_config(tmp_path):
    trainer = _trainer(horizon=1000, env_config={"frame_skip": 2, "episode_len": 10})
    try:
        trainer.train()
        path = trainer.save(str(tmp_path))
    finally:
        trainer.stop()
    # The model class comes back from the imported module; the env class is passed again.
    restored = DREAMERTrainer.from_checkpoint(path, config_overrides={"env": PixelPoint})
    try:
        assert restored.config["dreamer_model"]["custom_model"] is DreamerModel
        assert restored.config["horizon"] == 1000  # frames, not divided again
        assert restored.train()["timesteps_total"] > 40
    finally:
        restored.stop()


_DMC = """
    from corral.agents.dreamer import DREAMERTrainer
    from corral.env.dm_control_suite import hopper_hop
    from corral.tune.registry import register_env

    register_env("hopper_hop", lambda c: hopper_hop(task_kwargs={"time_limit": 0.5}))
    try:
        hopper_hop()
    except RuntimeError as e:
        print("NO RENDERER", e)
        raise SystemExit(0)
    trainer = DREAMERTrainer(
        config={
            "prefill_timesteps": 50, "dreamer_train_iters": 2, "batch_size": 2,
            "batch_length": 8, "imagine_horizon": 3, "rollout_fragment_length": 20,
            "seed": 0, "dreamer_model": %r,
        },
        env="hopper_hop",
    )
    result = trainer.train()
    # 0.5 s of hopper (25 control steps) at 2 frames per env step: 13-step episodes,
    # 2 of them per sample (>= 20 steps), 2 samples (prefill, then the rollout).
    assert result["episode_len_mean"] == 13, result["episode_len_mean"]
    assert result["timesteps_total"] == 2 * 4 * 13, result["timesteps_total"]
    action, state, _ = trainer.compute_single_action(
        hopper_hop().reset(seed=0)[0], state=trainer.get_policy().get_initial_state()
    )
    assert action.shape == (4,) and len(state) == 5
    trainer.stop()
    print("DMC OK")
"""


def test_trains_on_a_dm_control_task_from_pixels():
    # RLlib 1.13's test: one iteration on dm_control's hopper from 64 x 64 frames, in a fresh
    # interpreter (MUJOCO_GL is read when dm_control is first imported).
    pytest.importorskip("dm_control.suite", reason="dm_control is the `dm-control` extra")
    env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
    env["MUJOCO_GL"] = "egl"
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_DMC % TINY_MODEL)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    if "NO RENDERER" in out.stdout:
        pytest.skip(f"no EGL renderer on this machine: {out.stdout.strip()[:300]}")
    assert "DMC OK" in out.stdout
