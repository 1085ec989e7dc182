"""Trainer checkpoints: save/restore, fresh processes, no pickle, atomic writes, bad files."""

import json
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from corral.agents.ppo import PPOTrainer
from corral.agents.trainer import Trainer
from corral.tune.trainable import CheckpointError, checkpoint_folder

SMALL = {
    "num_workers": 0,
    "rollout_fragment_length": 50,
    "train_batch_size": 100,
    "sgd_minibatch_size": 50,
    "num_sgd_iter": 2,
    "model": {"fcnet_hiddens": [16]},
    "seed": 0,
}
OBSERVATIONS = np.random.default_rng(0).uniform(-0.2, 0.2, (8, 4)).astype(np.float32)


def _greedy_actions(trainer):
    return [int(trainer.compute_single_action(o, explore=False)) for o in OBSERVATIONS]


def _dist_inputs(trainer):
    return [
        trainer.compute_single_action(o, explore=False, full_fetch=True)[2]["action_dist_inputs"]
        for o in OBSERVATIONS
    ]


def _flat_tensors(tree, prefix=""):
    if isinstance(tree, dict):
        out = {}
        for k, v in tree.items():
            out.update(_flat_tensors(v, f"{prefix}/{k}"))
        return out
    if isinstance(tree, list | tuple):
        return _flat_tensors(dict(enumerate(tree)), prefix)
    return {prefix: tree}


def _assert_same_state(a, b):
    fa, fb = _flat_tensors(a), _flat_tensors(b)
    assert fa.keys() == fb.keys()
    for k in fa:
        if isinstance(fa[k], torch.Tensor):
            torch.testing.assert_close(fa[k], fb[k], rtol=0, atol=0, msg=k)
        else:
            np.testing.assert_array_equal(fa[k], fb[k], err_msg=k)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A trainer after two iterations and its checkpoint."""
    t = PPOTrainer(config=SMALL, env="CartPole-v1")
    t.train()
    t.train()
    path = checkpoint_folder(t.save(str(tmp_path_factory.mktemp("ckpt"))))
    yield t, path
    t.stop()


def test_layout_is_plain_data(trained):
    _, path = trained
    assert os.path.basename(path) == "checkpoint_000002"
    files = {os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path) for f in fs}
    # RLlib 1.13's `checkpoint-<iteration>` file (the path `save` returns) is JSON too.
    with open(os.path.join(path, "checkpoint-2"), encoding="utf-8") as f:
        json.load(f)
    files.remove("checkpoint-2")
    assert all(f.endswith((".json", ".safetensors", ".pt")) for f in files), files
    assert not [f for f in os.listdir(os.path.dirname(path)) if ".tmp-" in f]


def test_restore_continues_where_it_left_off(trained):
    t, path = trained
    fresh = PPOTrainer(config={**SMALL, "seed": 123}, env="CartPole-v1")
    try:
        fresh.restore(path)
        assert fresh.iteration == 2
        np.testing.assert_allclose(_dist_inputs(fresh), _dist_inputs(t), rtol=0, atol=0)
        _assert_same_state(fresh.get_weights(), t.get_weights())
        _assert_same_state(
            fresh.learner_group.get_state()["optimizers"], t.learner_group.get_state()["optimizers"]
        )
        local, original = fresh.workers.local_worker(), t.workers.local_worker()
        assert local.global_vars == original.global_vars
        assert fresh.get_policy().global_timestep == t.get_policy().global_timestep
        assert local.get_state()["filters"] == original.get_state()["filters"]
        result = fresh.train()
        assert result["training_iteration"] == 3
        assert result["timesteps_total"] == 300
        assert result["episodes_total"] > 0
    finally:
        fresh.stop()


def test_getstate_setstate_reach_remote_workers(trained):
    t, _ = trained
    other = PPOTrainer(config={**SMALL, "seed": 5, "num_workers": 1}, env="CartPole-v1")
    try:
        other.__setstate__(t.__getstate__())
        remote = other.workers.remote_workers()[0].call("get_weights").result(30)
        _assert_same_state(remote, t.get_weights())
        np.testing.assert_array_equal(_dist_inputs(other), _dist_inputs(t))
    finally:
        other.stop()


def test_save_checkpoint_and_load_checkpoint_directly(trained, tmp_path):
    t, _ = trained
    returned = t.save_checkpoint(str(tmp_path))
    assert returned == os.path.join(str(tmp_path), "checkpoint-2")
    for path in (returned, str(tmp_path)):
        other = PPOTrainer(config={**SMALL, "seed": 9}, env="CartPole-v1")
        try:
            other.load_checkpoint(path)
            np.testing.assert_array_equal(_dist_inputs(other), _dist_inputs(t))
        finally:
            other.stop()


def test_save_returns_rllib_s_checkpoint_file_and_everything_takes_it(tmp_path):
    """RLlib 1.13's `save()` returned `<dir>/checkpoint_<n:06d>/checkpoint-<n>`; its users
    restore from it and find the trial folder as its grandparent."""
    t = PPOTrainer(config=SMALL, env="CartPole-v1")
    try:
        t.train()
        returned = t.save(str(tmp_path))
        assert returned == os.path.join(str(tmp_path), "checkpoint_000001", "checkpoint-1")
        assert os.path.isfile(returned)
        restored = Trainer.from_checkpoint(returned)
        try:
            assert restored.iteration == 1
            np.testing.assert_array_equal(_dist_inputs(restored), _dist_inputs(t))
        finally:
            restored.stop()
        t.train()
        t.restore(returned)
        assert t.iteration == 1
    finally:
        t.stop()


_RESTORE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from corral.agents.ppo import PPOTrainer

    config, path, obs = json.loads(sys.argv[1])
    t = PPOTrainer(config={**config, "seed": 99}, env="CartPole-v1")
    t.restore(path)
    out = {
        "actions": [int(t.compute_single_action(np.float32(o), explore=False)) for o in obs],
        "logits": [
            t.compute_single_action(np.float32(o), explore=False, full_fetch=True)[2][
                "action_dist_inputs"
            ].tolist()
            for o in obs
        ],
        "iteration": t.train()["training_iteration"],
    }
    t.stop()
    print("RESULT" + json.dumps(out))
    """
)


def test_restore_in_a_fresh_process(trained):
    t, path = trained
    argument = json.dumps([SMALL, path, OBSERVATIONS.tolist()])
    proc = subprocess.run(
        [sys.executable, "-c", _RESTORE_SCRIPT, argument],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT"))
    out = json.loads(line[len("RESULT") :])
    assert out["actions"] == _greedy_actions(t)
    np.testing.assert_allclose(out["logits"], _dist_inputs(t), rtol=0, atol=0)
    assert out["iteration"] == t.iteration + 1


def test_restore_executes_no_pickle(trained, monkeypatch):
    t, path = trained

    def refuse(*args, **kwargs):
        raise AssertionError("pickle was used to load a checkpoint")

    other = PPOTrainer(config={**SMALL, "seed": 1}, env="CartPole-v1")
    try:
        monkeypatch.setattr(pickle, "load", refuse)
        monkeypatch.setattr(pickle, "loads", refuse)
        monkeypatch.setattr(pickle, "Unpickler", refuse)
        other.restore(path)
        monkeypatch.undo()
        np.testing.assert_array_equal(_dist_inputs(other), _dist_inputs(t))
    finally:
        other.stop()


def test_failed_save_leaves_nothing_behind(trained, tmp_path, monkeypatch):
    t, _ = trained

    def broken(checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "partial.json"), "w") as f:
            f.write("{")
        raise OSError("disk full")

    monkeypatch.setattr(t, "save_checkpoint", broken)
    with pytest.raises(OSError, match="disk full"):
        t.save(str(tmp_path))
    assert os.listdir(tmp_path) == []


def _copy(path, tmp_path):
    import shutil

    target = str(tmp_path / "copy")
    shutil.copytree(path, target)
    return target


def _truncate(file):
    size = os.path.getsize(file)
    with open(file, "r+b") as f:
        f.truncate(size // 2)


@pytest.mark.parametrize(
    "relative, expected",
    [
        ("policies/0/weights.safetensors", "safetensors"),
        ("learner_state.pt", "optimiser state"),
        ("trainer_state.json", "trainer state"),
        ("worker_state.json", "worker state"),
        (".tune_metadata.json", "metadata"),
    ],
)
def test_truncated_files_are_named(trained, tmp_path, relative, expected):
    """Without a manifest (older checkpoints), each reader still names its file."""
    _, path = trained
    copy = _copy(path, tmp_path)
    os.remove(os.path.join(copy, "manifest.json"))
    _truncate(os.path.join(copy, relative))
    other = PPOTrainer(config=SMALL, env="CartPole-v1")
    try:
        with pytest.raises(CheckpointError) as info, pytest.warns(UserWarning, match="manifest"):
            other.restore(copy)
    finally:
        other.stop()
    message = str(info.value)
    assert os.path.join(copy, relative) in message and expected in message


def test_missing_file_is_named(trained, tmp_path):
    _, path = trained
    copy = _copy(path, tmp_path)
    os.remove(os.path.join(copy, "policies", "0", "weights.safetensors"))
    other = PPOTrainer(config=SMALL, env="CartPole-v1")
    try:
        with pytest.raises(CheckpointError, match="weights.safetensors is missing"):
            other.restore(copy)
    finally:
        other.stop()


def test_mismatched_model_names_file_and_shapes(trained):
    _, path = trained
    other = PPOTrainer(config={**SMALL, "model": {"fcnet_hiddens": [8]}}, env="CartPole-v1")
    try:
        with pytest.raises(CheckpointError, match=r"weights\.safetensors.*\(16, 4\).*expected.*8"):
            other.restore(path)
    finally:
        other.stop()


def test_checkpoint_of_another_algorithm_is_refused(trained, tmp_path):
    _, path = trained
    copy = _copy(path, tmp_path)
    state_file = os.path.join(copy, "trainer_state.json")
    with open(state_file) as f:
        state = json.load(f)
    state["trainer"] = "DQN"
    with open(state_file, "w") as f:
        json.dump(state, f)
    os.remove(os.path.join(copy, "manifest.json"))  # else the edit itself is refused
    other = PPOTrainer(config=SMALL, env="CartPole-v1")
    try:
        with pytest.raises(CheckpointError, match="DQN, not PPO"), pytest.warns(UserWarning):
            other.restore(copy)
    finally:
        other.stop()
