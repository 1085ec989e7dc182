"""Property test (issue 11): random values of every numeric config key give either a
working trainer or a named error at construction, never an error from deep inside and
never a NaN weight.

For each example one top-level numeric key of PPO's (or DQN's) table gets a value
drawn from: numbers inside the key's spec, arbitrary ints and floats (negative,
zero, huge, NaN, inf), and values of the wrong type. Then:

- construction raises `ValueError`/`TypeError`/`NotImplementedError` whose message
  names the key; or
- the trainer is built, and (for a sample of the examples) one small `train()` runs:
  it succeeds, or the learner's guard stops a non-finite update with
  `NonFiniteUpdateError` (naming the policy; numerically absurd but type-correct
  coefficients such as `vf_loss_coeff=1e300` do that); the weights are finite
  either way.

Valid values that would only cost time or memory (thousands of workers, a
billion-step batch) are drawn up to a cap per key, so the test stays bounded.
"""

from __future__ import annotations

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from corral.agents.a3c import A2CTrainer  # noqa: E402
from corral.agents.dqn import DQNTrainer  # noqa: E402
from corral.agents.ppo import PPOTrainer  # noqa: E402
from corral.agents.sac import SACTrainer  # noqa: E402
from corral.core.learner import NonFiniteUpdateError  # noqa: E402
from corral.utils.config_spec import AnyOf, Num, Optional, Spec  # noqa: E402

PPO_BASE = {
    "env": "CartPole-v1",
    "num_workers": 0,
    "rollout_fragment_length": 32,
    "train_batch_size": 64,
    "sgd_minibatch_size": 32,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [8]},
    "evaluation_duration": 2,
    "log_sys_usage": False,
}
DQN_BASE = {
    "env": "CartPole-v1",
    "num_workers": 0,
    "rollout_fragment_length": 4,
    "train_batch_size": 16,
    "learning_starts": 16,
    "min_sample_timesteps_per_reporting": 32,
    "min_time_s_per_reporting": 0,
    "replay_buffer_config": {"capacity": 1000},
    "model": {"fcnet_hiddens": [8]},
    "hiddens": [8],
    "evaluation_duration": 2,
    "log_sys_usage": False,
}
SAC_BASE = {
    "env": "Pendulum-v1",
    "num_workers": 0,
    "rollout_fragment_length": 4,
    "train_batch_size": 16,
    "learning_starts": 16,
    "min_sample_timesteps_per_reporting": 32,
    "min_time_s_per_reporting": 0,
    "replay_buffer_config": {"capacity": 1000},
    "Q_model": {"fcnet_hiddens": [8]},
    "policy_model": {"fcnet_hiddens": [8]},
    "evaluation_duration": 2,
    "log_sys_usage": False,
}
A2C_BASE = {
    "env": "CartPole-v1",
    "num_workers": 0,
    "rollout_fragment_length": 16,
    "train_batch_size": 32,
    "min_time_s_per_reporting": 0,
    "model": {"fcnet_hiddens": [8]},
    "evaluation_duration": 2,
    "log_sys_usage": False,
}

# Largest valid value drawn per key: beyond it a value is valid but only costs time,
# processes or memory (the point here is correctness, not capacity).
CAPS = {
    "num_workers": 1,
    "num_envs_per_worker": 2,
    "evaluation_num_workers": 1,
    "evaluation_interval": 2,
    "evaluation_num_episodes": 2,
    "evaluation_duration": 2,
    "rollout_fragment_length": 64,
    "train_batch_size": 128,
    "sgd_minibatch_size": 64,
    "num_sgd_iter": 3,
    "min_iter_time_s": 0.2,
    "min_time_s_per_reporting": 0.2,
    "timesteps_per_iteration": 200,
    "min_sample_timesteps_per_reporting": 200,
    "min_train_timesteps_per_reporting": 200,
    "learning_starts": 200,
    "buffer_size": 10_000,
    "training_intensity": 64,
    "n_step": 5,
    "num_atoms": 11,
    "num_cpus_for_driver": 2,
    "num_cpus_per_worker": 2,
    "lr": 1.0,
    # Learner processes are slow to start; a GPU share needs a GPU.
    "num_learners": 1,
    "num_cpus_per_learner": 2,
    "num_gpus_per_learner": 0,
}
DEFAULT_INT_CAP = 10_000
DEFAULT_FLOAT_CAP = 1e3


def _numeric_part(spec: Spec) -> Num | None:
    """The `Num` a (possibly Optional/AnyOf) spec accepts, if any."""
    if isinstance(spec, Num):
        return spec
    if isinstance(spec, Optional):
        return _numeric_part(spec.inner)
    if isinstance(spec, AnyOf):
        for option in spec.options:
            num = _numeric_part(option)
            if num is not None:
                return num
    return None


def _numeric_keys(trainer_cls) -> dict[str, Num]:
    specs = trainer_cls.get_config_specs()
    return {k: n for k, s in specs.items() if (n := _numeric_part(s)) is not None}


def _in_range(key: str, num: Num) -> st.SearchStrategy:
    cap = CAPS.get(key)
    lo = num.lo if num.lo is not None else -DEFAULT_FLOAT_CAP
    if num.integer:
        lo = int(lo) + (1 if num.lo_open else 0)
        hi = lo + int(cap if cap is not None else DEFAULT_INT_CAP)
        if num.hi is not None:
            hi = min(hi, int(num.hi))
        return st.integers(lo, max(lo, hi))
    hi = lo + (cap if cap is not None else DEFAULT_FLOAT_CAP)
    if num.hi is not None:
        hi = min(hi, num.hi)
    return st.floats(lo, hi, exclude_min=num.lo_open, exclude_max=num.hi_open, allow_nan=False)


def _too_costly(key: str, num: Num, value) -> bool:
    """Valid, but above the key's cap (or a float key's sane magnitude for sizes)."""
    cap = CAPS.get(key)
    if cap is None or num.problem(value, key) is not None:
        return False
    return value > cap


WRONG_TYPES = st.one_of(
    st.text(max_size=5),
    st.booleans(),
    st.lists(st.integers(-3, 3), max_size=2),
    st.just({"a": 1}),
)
ANY_NUMBER = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 0.5, 1e-300, 1e300, -0.0]),
)


def _values(keys: dict[str, Num]) -> st.SearchStrategy:
    @st.composite
    def draw(draw_fn):
        key = draw_fn(st.sampled_from(sorted(keys)))
        num = keys[key]
        # In-range values twice as often: most examples should build a trainer.
        in_range = _in_range(key, num)
        value = draw_fn(st.one_of(in_range, in_range, ANY_NUMBER, WRONG_TYPES))
        if _too_costly(key, num, value):
            value = CAPS[key]
        train = draw_fn(st.integers(0, 2)) == 0
        return key, value, train

    return draw()


def _weights_finite(trainer) -> bool:
    weights = trainer.get_policy().get_weights()
    return all(np.isfinite(np.asarray(v)).all() for v in weights.values())


def _check(trainer_cls, base: dict, key: str, value, train: bool) -> None:
    config = {**base, key: value}
    try:
        trainer = trainer_cls(config=config)
    except (ValueError, TypeError, NotImplementedError) as err:
        assert key in str(err), f"{key}={value!r}: error does not name the key: {err!r}"
        return
    try:
        if train:
            try:
                trainer.train()
            except NonFiniteUpdateError as err:
                assert "default_policy" in str(err)
        assert _weights_finite(trainer), f"{key}={value!r} left non-finite weights"
    finally:
        trainer.stop()


PPO_KEYS = _numeric_keys(PPOTrainer)
DQN_KEYS = _numeric_keys(DQNTrainer)
SAC_KEYS = _numeric_keys(SACTrainer)
A2C_KEYS = _numeric_keys(A2CTrainer)


def test_the_property_covers_the_numeric_keys():
    for key in ("gamma", "lambda", "clip_param", "lr", "train_batch_size", "horizon", "seed"):
        assert key in PPO_KEYS
    for key in ("target_network_update_freq", "n_step", "tau", "learning_starts"):
        assert key in DQN_KEYS


SETTINGS = settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(case=_values(PPO_KEYS))
def test_ppo_numeric_values_work_or_are_named(case):
    _check(PPOTrainer, PPO_BASE, *case)


@settings(SETTINGS, max_examples=150)
@given(case=_values(DQN_KEYS))
def test_dqn_numeric_values_work_or_are_named(case):
    _check(DQNTrainer, DQN_BASE, *case)


@settings(SETTINGS, max_examples=100)
@given(case=_values(SAC_KEYS))
def test_sac_numeric_values_work_or_are_named(case):
    _check(SACTrainer, SAC_BASE, *case)


@settings(SETTINGS, max_examples=100)
@given(case=_values(A2C_KEYS))
def test_a2c_numeric_values_work_or_are_named(case):
    _check(A2CTrainer, A2C_BASE, *case)
