"""Loading a checkpoint runs no code it names; its files are verified; saving is atomic.

Each test plays a tampered checkpoint. The manifest only detects damage (anyone
who can edit a file can recompute its hash), so tests that tamper also rewrite
the manifest: what they check must hold with a perfectly consistent manifest.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from corral import cli
from corral.agents.dqn import DQNTrainer
from corral.agents.ppo import PPOTrainer
from corral.agents.trainer import Trainer
from corral.policy.policy import Policy
from corral.tune.trainable import checkpoint_folder
from corral.utils import checkpoint_files
from corral.utils.error import CheckpointError

SMALL = {
    "num_workers": 0,
    "rollout_fragment_length": 50,
    "train_batch_size": 100,
    "sgd_minibatch_size": 50,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [8]},
    "seed": 0,
}
OBS = np.random.default_rng(1).uniform(-0.2, 0.2, (6, 4)).astype(np.float32)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    trainer = PPOTrainer(config=SMALL, env="CartPole-v1")
    trainer.train()
    path = checkpoint_folder(trainer.save(str(tmp_path_factory.mktemp("ckpt"))))
    logits = _logits(trainer)
    trainer.stop()
    return path, logits


@pytest.fixture
def evil_module(tmp_path, monkeypatch):
    """A module on sys.path that leaves a marker file when imported."""
    marker = tmp_path / "IMPORTED"
    (tmp_path / "corral_evil_mod.py").write_text(
        textwrap.dedent(
            f"""
            open({str(marker)!r}, "w").write("imported")
            from corral.policy.policy import Policy
            import gymnasium as gym

            class EvilPolicy(Policy):
                pass

            class EvilEnv(gym.Env):
                pass

            gym.register("EvilEnv-v0", entry_point=EvilEnv)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("corral_evil_mod", None)
    yield marker
    sys.modules.pop("corral_evil_mod", None)


def _logits(trainer):
    return np.stack(
        [
            trainer.compute_single_action(o, explore=False, full_fetch=True)[2][
                "action_dist_inputs"
            ]
            for o in OBS
        ]
    )


def _copy(path, tmp_path, name="copy"):
    target = str(tmp_path / name / os.path.basename(path))
    shutil.copytree(path, target)
    return target


def _restore_error(path, match):
    """Restores `path` into a fresh trainer; returns the CheckpointError's message."""
    trainer = PPOTrainer(config=SMALL, env="CartPole-v1")
    try:
        with pytest.raises(CheckpointError, match=match) as info:
            trainer.restore(path)
    finally:
        trainer.stop()
    return str(info.value)


def _edit_json(checkpoint, relative, edit):
    path = os.path.join(checkpoint, relative)
    with open(path) as f:
        data = json.load(f)
    edit(data)
    with open(path, "w") as f:
        json.dump(data, f)
    checkpoint_files.write_manifest(checkpoint, "PPO")


# -- 1. `corral evaluate` never imports what params.json or the checkpoint names ---------------


def _legacy(checkpoint):
    """The checkpoint as corral wrote it before storing config and manifest."""
    os.remove(os.path.join(checkpoint, checkpoint_files.MANIFEST))
    path = os.path.join(checkpoint, "trainer_state.json")
    with open(path) as f:
        state = json.load(f)
    del state["config"]
    with open(path, "w") as f:
        json.dump(state, f)


@pytest.mark.parametrize("env", ["subprocess.Popen", "corral_evil_mod.EvilEnv"])
def test_evaluate_does_not_import_the_env_params_json_names(
    checkpoint, tmp_path, evil_module, monkeypatch, env, capsys
):
    import subprocess as sp

    calls = []
    monkeypatch.setattr(sp, "Popen", lambda *a, **k: calls.append(a))
    copy = _copy(checkpoint[0], tmp_path)
    _legacy(copy)
    with open(os.path.join(os.path.dirname(copy), "params.json"), "w") as f:
        json.dump({**SMALL, "env": env}, f)
    assert cli.main(["evaluate", copy, "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert f"names the env {env!r}" in err and "with --env" in err
    assert not calls and not evil_module.exists()


@pytest.mark.parametrize(
    "env",
    [
        "subprocess.Popen",
        {"__class__": "subprocess:Popen"},
        "corral_evil_mod:EvilEnv-v0",  # Gymnasium's `module:id` form imports the module
        "corral_evil_mod.EvilEnv",
    ],
)
def test_evaluate_does_not_import_the_env_the_checkpoint_names(
    checkpoint, tmp_path, evil_module, env, capsys
):
    copy = _copy(checkpoint[0], tmp_path)
    _edit_json(copy, "trainer_state.json", lambda s: s["config"].update(env=env))
    assert cli.main(["evaluate", copy, "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert "with --env" in err and "does not import" in err
    assert not evil_module.exists()


def test_evaluate_with_an_explicit_env_runs(checkpoint, tmp_path, capsys):
    copy = _copy(checkpoint[0], tmp_path)
    _edit_json(copy, "trainer_state.json", lambda s: s["config"].update(env="subprocess.Popen"))
    assert cli.main(["evaluate", copy, "--episodes", "1", "--env", "CartPole-v1"]) == 0
    assert "Mean reward over 1 episodes" in capsys.readouterr().out


def test_code_valued_config_is_never_resolved_from_a_checkpoint(checkpoint, tmp_path, capsys):
    copy = _copy(checkpoint[0], tmp_path)

    def edit(state):
        state["config"]["callbacks"] = {"__class__": "subprocess:Popen"}
        state["config"]["multiagent"]["policy_mapping_fn"] = {"__function__": "os:system"}
        state["config"]["exploration_config"] = {"type": "subprocess.Popen"}

    _edit_json(copy, "trainer_state.json", edit)
    with pytest.raises(CheckpointError) as info:
        Trainer.from_checkpoint(copy)
    message = str(info.value)
    assert "callbacks" in message and "not a subclass of DefaultCallbacks" in message
    assert "multiagent.policy_mapping_fn" in message and "do not store code" in message
    assert "exploration_config.type" in message and "not a subclass of Exploration" in message
    # The CLI falls back to the defaults for all three and rolls out.
    assert cli.main(["evaluate", copy, "--episodes", "1"]) == 0


# -- 2. restore() resolves classes without importing; paths stay inside ---------------------


def _add_policy_entry(state, policy_class):
    state["policy_changes"]["added"]["intruder"] = {
        "policy_class": policy_class,
        "evaluation_workers": True,
        "observation_space": {"type": "Discrete", "n": 2, "start": 0},
        "action_space": {"type": "Discrete", "n": 2, "start": 0},
        "config": {},
    }


def test_restore_does_not_import_an_added_policy_class(checkpoint, tmp_path, evil_module):
    copy = _copy(checkpoint[0], tmp_path)
    _edit_json(
        copy, "trainer_state.json", lambda s: _add_policy_entry(s, "corral_evil_mod.EvilPolicy")
    )
    _restore_error(copy, "not imported in this process")
    assert not evil_module.exists()


def test_restore_refuses_a_loaded_class_that_is_not_a_policy(checkpoint, tmp_path):
    copy = _copy(checkpoint[0], tmp_path)
    _edit_json(copy, "trainer_state.json", lambda s: _add_policy_entry(s, "subprocess:Popen"))
    _restore_error(copy, "not a subclass of Policy")


class _ImportedPolicy(Policy):
    """Stands for a user's policy class that the user's program has imported."""


def test_restore_resolves_a_policy_class_the_process_imported(checkpoint, tmp_path):
    from corral.utils.checkpoint_config import qualified_name, resolve_class

    name = qualified_name(_ImportedPolicy)
    assert resolve_class(name, Policy, "test") is _ImportedPolicy
    # corral's own modules may be imported on a checkpoint's word.
    sys.modules.pop("corral.agents.pg.pg_torch_policy", None)
    pg = resolve_class("corral.agents.pg.pg_torch_policy.PGTorchPolicy", Policy, "test")
    assert pg.__name__ == "PGTorchPolicy"


@pytest.mark.parametrize("folder", ["../..", "/etc", "policies/../../.."])
def test_policy_folders_outside_the_checkpoint_are_refused(checkpoint, tmp_path, folder):
    copy = _copy(checkpoint[0], tmp_path)
    _edit_json(copy, "trainer_state.json", lambda s: s["policies"].update(default_policy=folder))
    _restore_error(copy, "outside the checkpoint|relative path")


# -- 3. integrity: manifest, finite weights, readable JSON -------------------------------------


@pytest.mark.parametrize(
    "relative", ["policies/0/weights.safetensors", "learner_state.pt", "trainer_state.json"]
)
def test_a_flipped_byte_is_named(checkpoint, tmp_path, relative):
    copy = _copy(checkpoint[0], tmp_path)
    path = os.path.join(copy, relative)
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    message = _restore_error(copy, "SHA-256")
    assert path in message


def test_nan_weights_are_refused_even_with_a_matching_manifest(checkpoint, tmp_path):
    copy = _copy(checkpoint[0], tmp_path)
    path = os.path.join(copy, "policies", "0", "weights.safetensors")
    weights = load_file(path)
    name = sorted(weights)[0]
    weights[name] = weights[name].copy()
    weights[name].flat[0] = np.nan
    save_file(weights, path)
    checkpoint_files.write_manifest(copy, "PPO")
    _restore_error(copy, f"{name}.*NaN")


def test_files_added_after_saving_are_refused(checkpoint, tmp_path):
    copy = _copy(checkpoint[0], tmp_path)
    with open(os.path.join(copy, "extra_state.json"), "w") as f:
        f.write("{}")
    _restore_error(copy, "extra_state.json is not in the manifest")


def test_manifest_records_what_api_md_lists(checkpoint):
    with open(os.path.join(checkpoint[0], checkpoint_files.MANIFEST)) as f:
        manifest = json.load(f)
    from corral import __version__

    assert manifest["format_version"] == 1
    assert manifest["corral_version"] == __version__
    assert manifest["algorithm"] == "PPO"
    listed = manifest["files"]
    assert "policies/0/weights.safetensors" in listed and ".tune_metadata.json" in listed
    for relative, entry in listed.items():
        assert entry["size"] == os.path.getsize(os.path.join(checkpoint[0], relative))
        assert len(entry["sha256"]) == 64


def test_a_checkpoint_without_manifest_loads_with_a_warning(checkpoint, tmp_path):
    copy = _copy(checkpoint[0], tmp_path)
    os.remove(os.path.join(copy, checkpoint_files.MANIFEST))
    trainer = PPOTrainer(config=SMALL, env="CartPole-v1")
    try:
        with pytest.warns(UserWarning, match="no manifest.json"):
            trainer.restore(copy)
        np.testing.assert_array_equal(_logits(trainer), checkpoint[1])
    finally:
        trainer.stop()


def test_non_utf8_json_names_the_file(checkpoint, tmp_path):
    copy = _copy(checkpoint[0], tmp_path)
    path = os.path.join(copy, "worker_state.json")
    with open(path, "wb") as f:
        f.write(b'{"filters": "\xff\xfe"}')
    checkpoint_files.write_manifest(copy, "PPO")
    message = _restore_error(copy, "is not UTF-8")
    assert path in message


def test_restore_across_algorithms_says_which_wrote_it(checkpoint):
    trainer = DQNTrainer(config={"num_workers": 0}, env="CartPole-v1")
    try:
        with pytest.raises(CheckpointError, match="written by PPO, not DQN"):
            trainer.restore(checkpoint[0])
    finally:
        trainer.stop()
    with pytest.raises(CheckpointError, match="written by PPO, not DQN"):
        DQNTrainer.from_checkpoint(checkpoint[0])


# -- 4. atomic save ----------------------------------------------------------------------------

_KILLED_SAVE = textwrap.dedent(
    """
    import os, sys
    from corral.agents.ppo import PPOTrainer
    from corral.utils import checkpoint_files

    config, parent, stage = sys.argv[1], sys.argv[2], sys.argv[3]
    import json
    t = PPOTrainer(config=json.loads(config), env="CartPole-v1")
    t.train()
    first = t.save(parent)
    print("FIRST", first, flush=True)
    t.get_policy().set_weights(
        {k: v * 0 for k, v in t.get_policy().get_weights().items()}
    )
    real = {"fsync": checkpoint_files.fsync_tree, "move": checkpoint_files.move_into_place}

    def killed(*args):
        if stage == "after_move":
            real["move"](*args)
        os._exit(9)

    if stage == "before_move":
        checkpoint_files.fsync_tree = killed
    else:
        checkpoint_files.move_into_place = killed
    t.save(parent)  # same iteration: replaces the first checkpoint
    """
)


@pytest.mark.parametrize("stage", ["before_move", "after_move"])
def test_a_killed_save_leaves_a_complete_checkpoint(tmp_path, stage):
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED_SAVE, json.dumps(SMALL), str(tmp_path), stage],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 9, proc.stderr[-2000:]
    path = proc.stdout.split("FIRST ")[1].split()[0]
    trainer = PPOTrainer(config=SMALL, env="CartPole-v1")
    try:
        trainer.restore(path)  # verifies the manifest: the folder is whole
        zeros = all(not np.any(v) for v in trainer.get_policy().get_weights().values())
        assert zeros == (stage == "after_move")
        leftovers = [f for f in os.listdir(tmp_path) if f.startswith(".")]
        assert leftovers if stage == "before_move" else True
        trainer.save(str(tmp_path))  # cleans up what the killed save left
        assert [f for f in os.listdir(tmp_path) if f.startswith(".")] == []
    finally:
        trainer.stop()


def test_fallback_without_atomic_exchange_still_replaces(tmp_path, monkeypatch):
    trainer = PPOTrainer(config=SMALL, env="CartPole-v1")
    parent = tmp_path / "checkpoints"
    try:
        first = checkpoint_folder(trainer.save(str(parent)))
        monkeypatch.setattr(checkpoint_files, "_exchange", lambda a, b: False)
        assert checkpoint_folder(trainer.save(str(parent))) == first
        assert sorted(os.listdir(parent)) == [os.path.basename(first)]
        checkpoint_files.verify_manifest(first)
    finally:
        trainer.stop()


# -- from_checkpoint ---------------------------------------------------------------------------


def test_from_checkpoint_rebuilds_the_algorithm_with_overrides(checkpoint):
    path, logits = checkpoint
    trainer = Trainer.from_checkpoint(path, config_overrides={"explore": False, "num_workers": 0})
    try:
        assert type(trainer).__name__ == "PPOTrainer"
        assert trainer.iteration == 1
        assert trainer.config["explore"] is False
        assert trainer.config["model"]["fcnet_hiddens"] == [8]
        np.testing.assert_array_equal(_logits(trainer), logits)
    finally:
        trainer.stop()


class _MyCartPole:
    """An env given as a class: a checkpoint cannot name it back."""

    def __new__(cls, ctx):
        import gymnasium as gym

        return gym.make("CartPole-v1")


def test_from_checkpoint_needs_an_env_class_passed_again(tmp_path):
    trainer = PPOTrainer(config=SMALL, env=_MyCartPole)
    path = trainer.save(str(tmp_path))
    trainer.stop()
    with pytest.raises(CheckpointError, match="env.*pass the env yourself"):
        PPOTrainer.from_checkpoint(path)
    restored = PPOTrainer.from_checkpoint(path, {"env": _MyCartPole})
    restored.stop()


# -- two threads ---------------------------------------------------------------------------


def test_train_from_two_threads_keeps_the_counters(tmp_path):
    trainer = PPOTrainer(config=SMALL, env="CartPole-v1")
    try:
        results = []

        def work():
            for _ in range(2):
                results.append(trainer.train())

        threads = [threading.Thread(target=work) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(r["training_iteration"] for r in results) == [1, 2, 3, 4]
        assert trainer.iteration == 4
        assert max(r["timesteps_total"] for r in results) == 4 * SMALL["train_batch_size"]
    finally:
        trainer.stop()


def test_a_logger_type_named_by_a_checkpoint_is_not_imported(checkpoint, tmp_path, evil_module):
    copy = _copy(checkpoint[0], tmp_path)
    _edit_json(
        copy,
        "trainer_state.json",
        lambda s: s["config"].update(logger_config={"type": "corral_evil_mod.EvilLogger"}),
    )
    with pytest.raises(CheckpointError, match="logger_config.type"):
        Trainer.from_checkpoint(copy)
    assert not evil_module.exists()
    restored = Trainer.from_checkpoint(copy, config_overrides={"logger_config": None})
    restored.stop()
