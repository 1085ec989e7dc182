"""IMPALA: config checks, the V-trace loss's trajectory pieces, the learner thread's
queue and replays, asynchronous training with and without remote workers, checkpoints."""

import queue
import time

import numpy as np
import pytest
import torch

from corral.agents.impala import DEFAULT_CONFIG, ImpalaTrainer
from corral.agents.impala.impala import MixInReplay
from corral.agents.impala.impala_torch_policy import (
    UNROLL_ID,
    piece_starts,
    vtrace_targets,
)
from corral.execution.buffers.minibatch_buffer import MinibatchBuffer
from corral.execution.learner_thread import LearnerThread
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch

FAST = {
    "env": "CartPole-v1",
    "num_workers": 0,
    "rollout_fragment_length": 20,
    "train_batch_size": 40,
    "min_time_s_per_reporting": 0,
    "seed": 0,
}


def test_default_config_keys_are_rllibs():
    for key in (
        "vtrace_drop_last_ts",
        "learner_queue_size",
        "learner_queue_timeout",
        "minibatch_buffer_size",
        "replay_proportion",
        "replay_buffer_num_slots",
        "max_sample_requests_in_flight_per_worker",
        "broadcast_interval",
        "opt_type",
        "decay",
        "momentum",
        "epsilon",
    ):
        assert key in DEFAULT_CONFIG


def test_rllib_2_name_of_the_requests_in_flight_key_is_taken():
    trainer = ImpalaTrainer(config={**FAST, "max_requests_in_flight_per_sampler_worker": 3})
    try:
        assert trainer.config["max_sample_requests_in_flight_per_worker"] == 3
    finally:
        trainer.stop()


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"opt_type": "sgd"}, "opt_type"),
        ({"replay_proportion": 0.5, "replay_buffer_num_slots": 0}, "replay_buffer_num_slots"),
        ({"num_aggregation_workers": 2, "num_workers": 1}, "num_aggregation_workers"),
        ({"after_train_step": 3}, "after_train_step"),
    ],
)
def test_bad_config_is_a_clear_error(bad, match):
    with pytest.raises((ValueError, NotImplementedError), match=match):
        ImpalaTrainer(config={**FAST, **bad})


def _flat_batch():
    # Two fragments (unroll 1: an episode ends after row 2, then a new one is cut at
    # row 4; unroll 2: one cut piece of 2 rows).
    return {
        SampleBatch.REWARDS: torch.tensor([1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 2.0]),
        SampleBatch.TERMINATEDS: torch.tensor([0, 0, 1, 0, 0, 0, 0]).bool(),
        SampleBatch.TRUNCATEDS: torch.zeros(7, dtype=torch.bool),
        SampleBatch.EPS_ID: torch.tensor([5, 5, 5, 6, 6, 7, 7]),
        SampleBatch.T: torch.tensor([0, 1, 2, 0, 1, 8, 9]),
        UNROLL_ID: torch.tensor([1, 1, 1, 1, 1, 2, 2]),
    }


class _Cfg:
    def __init__(self, **kw):
        self.config = {
            "gamma": 0.5,
            "vtrace_clip_rho_threshold": 1.0,
            "vtrace_clip_pg_rho_threshold": 1.0,
            "vtrace_drop_last_ts": True,
            "model": {"max_seq_len": 20},
            **kw,
        }


def test_pieces_start_at_new_fragments_episodes_and_after_ends():
    assert piece_starts(_flat_batch()).tolist() == [1, 0, 0, 1, 0, 1, 0]


def test_drop_last_keeps_terminal_steps_and_bootstraps_cut_pieces_from_their_last_value():
    batch = _flat_batch()
    values = torch.tensor([0.0, 0.0, 0.0, 0.0, 4.0, 0.0, 8.0])
    vs, adv, mask = vtrace_targets(_Cfg(), batch, values, torch.zeros(7))
    # The cut pieces' last rows (4 and 6) only bootstrap; the terminal row 2 is trained.
    assert mask.tolist() == [True, True, True, True, False, True, False]
    # On-policy: n-step returns with gamma 0.5.
    assert vs[:3].tolist() == pytest.approx([1 + 0.5 + 0.25, 1 + 0.5, 1])
    assert vs[3].item() == pytest.approx(1 + 0.5 * 4.0)
    assert vs[5].item() == pytest.approx(2 + 0.5 * 8.0)
    assert adv[5].item() == pytest.approx(2 + 0.5 * 8.0 - 0.0)


def test_without_drop_last_cut_pieces_bootstrap_with_v_of_new_obs():
    batch = _flat_batch()
    values = torch.zeros(7)
    asked = []

    def boot(rows):
        asked.append(rows.tolist())
        return torch.tensor([10.0, 20.0])

    vs, _, mask = vtrace_targets(
        _Cfg(vtrace_drop_last_ts=False), batch, values, torch.zeros(7), boot
    )
    assert asked == [[4, 6]] and bool(mask.all())
    assert vs[4].item() == pytest.approx(1 + 0.5 * 10.0)
    assert vs[6].item() == pytest.approx(2 + 0.5 * 20.0)
    assert vs[2].item() == pytest.approx(1.0)  # terminal: no bootstrap


def test_mixin_replay_proportion_and_slots():
    def batch(value):
        return SampleBatch({"obs": np.array([value])})

    def values(batches):
        return [int(b["obs"][0]) for b in batches]

    mix = MixInReplay(num_slots=2, replay_proportion=1.0, seed=0)
    # RLlib 1.13's order: the new batch joins the slots first, so it may be replayed.
    assert values(mix(batch(1))) == [1, 1]
    out = values(mix(batch(2)))
    assert out[0] == 2 and out[1] in (1, 2)
    mix(batch(3))
    assert set(values(mix.replay_buffer.replay_batches)) == {2, 3}
    half = MixInReplay(num_slots=4, replay_proportion=0.5, seed=0)
    replayed = [len(half(batch(i))) - 1 for i in range(400)]
    assert set(replayed) == {0, 1} and 0.4 < np.mean(replayed) < 0.6


def test_minibatch_buffer_hands_each_item_num_passes_times():
    q = queue.Queue()
    for x in "xy":
        q.put(x)
    buf = MinibatchBuffer(q, size=2, timeout=0.1, num_passes=2, init_num_passes=2)
    assert [buf.get()[0] for _ in range(4)] == ["x", "y", "x", "y"]
    with pytest.raises(queue.Empty):
        buf.get()


def test_learner_thread_records_policy_lag_and_busy_time():
    class Worker:
        policy_map = {}

        def __init__(self):
            self.seq = 0

        def get_weights_seqs(self):
            return {"default_policy": self.seq}

        def get_weights(self):
            return {"default_policy": {"w": np.zeros(1)}}

    worker = Worker()

    def update(batch):
        worker.seq += 1
        return {"default_policy": {"learner_stats": {"x": 1.0}}}

    thread = LearnerThread(worker, 1, 2, 4, 5.0, update_fn=update)
    batch = MultiAgentBatch({"default_policy": SampleBatch({"obs": np.zeros((3, 1))})}, 3)
    thread.inqueue.put((batch, {"default_policy": [0, 0]}))
    assert thread.step() and thread.step()  # num_sgd_iter=2: the same batch twice
    assert worker.seq == 2 and thread.num_steps_trained == 6
    assert thread.policy_lag.items[: thread.policy_lag.count] == [1, 1, 2, 2]
    assert thread.published_weights()[1] == {"default_policy": 2}
    result = thread.add_learner_metrics({"info": {}})
    assert result["info"]["policy_lag"]["max"] == 2
    assert 0.0 < result["info"]["learner_busy_fraction"] <= 1.0


def _train_a_bit(config, iterations=3):
    trainer = ImpalaTrainer(config=config)
    try:
        results = [trainer.train() for _ in range(iterations)]
    except BaseException:
        trainer.stop()
        raise
    return trainer, results


def test_trains_asynchronously_with_remote_workers():
    trainer, results = _train_a_bit({**FAST, "num_workers": 2, "min_time_s_per_reporting": 1})
    try:
        last = results[-1]
        info = last["info"]
        assert info["num_env_steps_trained"] > 0
        assert last["num_env_steps_sampled"] >= info["num_env_steps_trained"]
        assert "size_mean" in info["learner_queue"]
        assert info["policy_lag"]["mean"] >= 0
        assert 0 <= info["learner_busy_fraction"] <= 1
        assert info["learner_throughput"] > 0
        assert info["num_weight_broadcasts"] > 0
        assert "policy_loss" in info["learner"]["default_policy"]["learner_stats"]
        assert last["num_healthy_workers"] == 2
    finally:
        trainer.stop()


def test_num_workers_0_samples_locally_and_rmsprop_is_built():
    trainer, _ = _train_a_bit({**FAST, "opt_type": "rmsprop", "decay": 0.9}, 1)
    try:
        opt = trainer.learner_group.local_learner.optimizers["default_policy"]
        assert isinstance(opt, torch.optim.RMSprop)
        assert opt.defaults["alpha"] == 0.9 and opt.defaults["eps"] == 0.1
        # The learner thread trains asynchronously: its first batch may come several
        # iterations in (in a fresh process its first optimiser step imports torch's
        # compiler stack), so train until it has, within a deadline.
        deadline = time.monotonic() + 60
        trained = 0
        while trained < 40 and time.monotonic() < deadline:
            trained = trainer.train()["info"]["num_env_steps_trained"]
        assert trained >= 40
    finally:
        trainer.stop()


def test_checkpoint_restores_weights(tmp_path):
    trainer, _ = _train_a_bit({**FAST, "num_workers": 1, "min_time_s_per_reporting": 1}, 2)
    try:
        path = trainer.save(str(tmp_path))
        weights = trainer.get_weights()
    finally:
        trainer.stop()
    restored = ImpalaTrainer(config={**FAST, "num_workers": 1})
    try:
        restored.restore(path)
        for k, v in weights["default_policy"].items():
            np.testing.assert_array_equal(restored.get_weights()["default_policy"][k], v)
        restored.train()  # and training goes on
    finally:
        restored.stop()


def test_vtrace_false_uses_the_a3c_loss():
    trainer, _ = _train_a_bit({**FAST, "vtrace": False}, 1)
    try:
        assert type(trainer.get_policy()).__name__ == "A3CTorchPolicy"
    finally:
        trainer.stop()


def test_recurrent_model_runs_vtrace_over_sequences():
    trainer, results = _train_a_bit(
        {
            **FAST,
            "model": {"use_lstm": True, "max_seq_len": 10, "lstm_cell_size": 16},
            "vtrace_drop_last_ts": False,  # a recurrent policy bootstraps from its last step
        },
        2,
    )
    try:
        result = results[-1]
        for _ in range(50):  # until the learner thread reported an update
            if "default_policy" in result["info"]["learner"]:
                break
            result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert np.isfinite(stats["total_loss"]) and result["num_env_steps_trained"] > 0
    finally:
        trainer.stop()


def test_vtrace_over_padded_sequences_bootstraps_each_from_its_last_step():
    # Two sequences of max_seq_len 3: [a, b, pad] (cut), [c, d, e] (terminated at e).
    batch = {
        SampleBatch.REWARDS: torch.tensor([1.0, 1.0, 0.0, 1.0, 1.0, 1.0]),
        SampleBatch.TERMINATEDS: torch.tensor([0, 0, 0, 0, 0, 1]).bool(),
        "seq_mask": torch.tensor([1, 1, 0, 1, 1, 1]).bool(),
    }
    values = torch.tensor([0.0, 3.0, 9.0, 0.0, 0.0, 0.0])
    vs, _, mask = vtrace_targets(_Cfg(model={"max_seq_len": 3}), batch, values, torch.zeros(6))
    assert mask.tolist() == [True, False, False, True, True, True]
    assert vs[0].item() == pytest.approx(1 + 0.5 * 3.0)
    assert vs[3:].tolist() == pytest.approx([1.75, 1.5, 1.0])
