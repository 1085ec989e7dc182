"""`torch_compile_learner`: the learner's losses through `torch.compile` (issue 17).

Compiled updates must move the weights as eager ones do (within float tolerance) for
PPO, DQN and SAC; batch sizes that change compile a bounded number of times; a backend
that fails leaves a warning and eager updates.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from corral.agents.dqn import DQNTrainer
from corral.agents.ppo import PPOTrainer
from corral.agents.sac import SACTrainer
from corral.policy.sample_batch import concat_samples

_COMPILES: list[int] = []


def _counting_backend(gm, example_inputs):
    _COMPILES.append(len(example_inputs))
    return gm.forward


def _failing_backend(gm, example_inputs):
    raise RuntimeError("no compiler on this machine")


torch._dynamo.register_backend(_counting_backend, name="corral_test_counting")
torch._dynamo.register_backend(_failing_backend, name="corral_test_failing")

COMMON = {"num_workers": 0, "seed": 0, "min_iter_time_s": 0}
PPO = {
    **COMMON,
    "rollout_fragment_length": 32,
    "train_batch_size": 64,
    "sgd_minibatch_size": 32,
    "num_sgd_iter": 2,
    "model": {"fcnet_hiddens": [16]},
    "grad_clip": 0.5,
}
DQN = {
    **COMMON,
    "rollout_fragment_length": 32,
    "model": {"fcnet_hiddens": [16]},
    "grad_clip": 10.0,
}
SAC = {
    **COMMON,
    "rollout_fragment_length": 32,
    "Q_model": {"fcnet_hiddens": [16]},
    "policy_model": {"fcnet_hiddens": [16]},
    # No sampling in the losses: eager and compiled see the same numbers.
    "_deterministic_loss": True,
}


def _compiled(config, backend):
    return {
        **config,
        "torch_compile_learner": True,
        "torch_compile_learner_dynamo_backend": backend,
    }


def _batches(trainer, sizes):
    worker = trainer.workers.local_worker()
    rows = concat_samples([worker.sample() for _ in range(-(-sum(sizes) // 32))])
    out, start = [], 0
    for n in sizes:
        out.append(rows.slice(start, start + n))
        start += n
    return out


def _weights(trainer):
    return {k: np.array(v, copy=True) for k, v in trainer.get_policy().get_weights().items()}


def _train_both(cls, config, env, backend, sizes, minibatch_size=None):
    """Eager and compiled trainers from the same seed, updated on the same batches."""
    eager, compiled = cls(config=config, env=env), cls(config=_compiled(config, backend), env=env)
    try:
        w0 = _weights(eager)
        for k, v in _weights(compiled).items():
            np.testing.assert_array_equal(v, w0[k])
        stats = []
        for batch in _batches(eager, sizes):
            pair = []
            for trainer in (eager, compiled):
                results = trainer.learner_group.update(
                    batch=batch.copy(), minibatch_size=minibatch_size, num_epochs=2
                )
                pair.append(trainer.learner_info_from(results)["default_policy"])
            stats.append(pair)
        policy = compiled.get_policy()
        assert not {"loss", "_losses_continuous", "_losses_discrete"} & set(vars(policy))
        return _weights(eager), _weights(compiled), w0, stats
    finally:
        eager.stop()
        compiled.stop()


def _assert_close(a, b, w0):
    moved = False
    for k in a:
        np.testing.assert_allclose(b[k], a[k], rtol=1e-4, atol=1e-5, err_msg=k)
        moved |= not np.array_equal(a[k], w0[k])
    assert moved, "the updates changed no weight"


@pytest.mark.parametrize(
    ("cls", "config", "env"),
    [
        (PPOTrainer, PPO, "CartPole-v1"),
        (DQNTrainer, DQN, "CartPole-v1"),
        (SACTrainer, SAC, "Pendulum-v1"),
    ],
    ids=["ppo", "dqn", "sac"],
)
def test_compiled_updates_match_eager(cls, config, env):
    eager, compiled, w0, stats = _train_both(cls, config, env, "aot_eager", [64, 48, 64])
    _assert_close(eager, compiled, w0)
    for eager_info, compiled_info in stats:
        for name, value in eager_info["learner_stats"].items():
            if isinstance(value, float):
                assert compiled_info["learner_stats"][name] == pytest.approx(
                    value, rel=1e-3, abs=1e-5
                ), name


@pytest.mark.parametrize(
    ("cls", "config", "env"),
    [(PPOTrainer, PPO, "CartPole-v1"), (SACTrainer, SAC, "Pendulum-v1")],
    ids=["ppo", "sac"],
)
def test_changing_batch_sizes_compile_a_bounded_number_of_times(cls, config, env):
    _COMPILES.clear()
    torch._dynamo.reset()
    sizes = [64, 48, 40, 56, 64, 33]
    eager, compiled, w0, _ = _train_both(cls, config, env, "corral_test_counting", sizes)
    _assert_close(eager, compiled, w0)
    # The first shape, then once more with the batch dimension dynamic (per compiled
    # method and grad mode: SAC's continuous losses are one method).
    assert 1 <= len(_COMPILES) <= 4, _COMPILES


def test_a_failing_backend_warns_and_updates_eagerly(caplog):
    with caplog.at_level(logging.WARNING, logger="corral.core.learner"):
        eager, compiled, w0, _ = _train_both(
            DQNTrainer, DQN, "CartPole-v1", "corral_test_failing", [64, 64]
        )
    _assert_close(eager, compiled, w0)
    messages = [r.getMessage() for r in caplog.records if "torch_compile_learner" in r.getMessage()]
    assert len(messages) == 1, messages
    assert "DQNTorchPolicy.loss" in messages[0] and "no compiler on this machine" in messages[0]


def test_inductor_dqn_update_matches_eager():
    eager, compiled, w0, _ = _train_both(DQNTrainer, DQN, "CartPole-v1", "inductor", [64])
    _assert_close(eager, compiled, w0)


def test_config_rejects_a_bad_mode():
    with pytest.raises(ValueError, match="torch_compile_learner_dynamo_mode"):
        DQNTrainer(
            config={**DQN, "torch_compile_learner_dynamo_mode": "fastest"}, env="CartPole-v1"
        )
