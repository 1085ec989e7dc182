"""Export (TorchScript, ONNX, policy checkpoints) and HDF5 import of policy models."""

import json
import os

import numpy as np
import pytest
import torch

from corral.agents.ppo import PPOTrainer

SMALL = {
    "num_workers": 0,
    "rollout_fragment_length": 50,
    "train_batch_size": 100,
    "sgd_minibatch_size": 50,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [16]},
    "seed": 0,
}
OBS = np.random.default_rng(1).normal(size=(5, 4)).astype(np.float32)


@pytest.fixture(scope="module")
def trainer():
    t = PPOTrainer(config=SMALL, env="CartPole-v1")
    t.train()
    yield t
    t.stop()


def _policy_outputs(trainer, obs):
    _, extra = trainer.get_policy().compute_actions_from_obs(obs, explore=False)
    return extra["action_dist_inputs"], extra["vf_preds"]


def test_torchscript_export(trainer, tmp_path):
    trainer.export_policy_model(str(tmp_path))
    assert {"model.pt", "model_state_dict.pt"} <= set(os.listdir(tmp_path))
    model = torch.jit.load(str(tmp_path / "model.pt"))
    logits, values = model(torch.from_numpy(OBS))
    expected_logits, expected_values = _policy_outputs(trainer, OBS)
    np.testing.assert_allclose(logits.detach().numpy(), expected_logits, atol=1e-6)
    np.testing.assert_allclose(values.detach().numpy(), expected_values, atol=1e-6)
    state = torch.load(str(tmp_path / "model_state_dict.pt"), weights_only=True)
    assert state.keys() == trainer.get_weights()["default_policy"].keys()


@pytest.mark.parametrize("opset", [11, 18])
def test_onnx_export_matches_the_policy(trainer, tmp_path, opset):
    pytest.importorskip("onnx", reason="ONNX export needs the `onnx` extra")
    ort = pytest.importorskip("onnxruntime", reason="the ONNX check needs onnxruntime")
    if opset >= 18:
        pytest.importorskip("onnxscript", reason="torch's opset>=18 exporter needs onnxscript")
    trainer.export_policy_model(str(tmp_path), onnx=opset)
    session = ort.InferenceSession(str(tmp_path / "model.onnx"))
    assert [i.name for i in session.get_inputs()] == ["obs"]
    assert session.get_outputs()[0].name == "output"
    output, values = session.run(None, {"obs": OBS})
    expected_logits, expected_values = _policy_outputs(trainer, OBS)
    np.testing.assert_allclose(output, expected_logits, atol=1e-5, rtol=0)
    np.testing.assert_allclose(values, expected_values, atol=1e-5, rtol=0)


def test_export_policy_checkpoint(trainer, tmp_path):
    from safetensors.numpy import load_file

    trainer.export_policy_checkpoint(str(tmp_path), filename_prefix="pol")
    weights = load_file(str(tmp_path / "pol.safetensors"))
    for k, v in trainer.get_weights()["default_policy"].items():
        np.testing.assert_array_equal(weights[k], v)
    with open(tmp_path / "pol_state.json") as f:
        assert "global_timestep" in json.load(f)


def test_export_model_formats(trainer, tmp_path):
    exported = trainer.export_model(["checkpoint", "model"], str(tmp_path))
    assert os.path.isfile(os.path.join(exported["model"], "model.pt"))
    assert os.path.isfile(os.path.join(exported["checkpoint"], "model.safetensors"))
    with pytest.raises(ValueError, match="Unsupported export format"):
        trainer.export_model(["pdf"], str(tmp_path))


def test_unknown_policy_for_export(trainer, tmp_path):
    with pytest.raises(KeyError, match="other"):
        trainer.export_policy_model(str(tmp_path), policy_id="other")


def _write_h5(path, weights, drop=(), extra=None, keras_layer=None):
    h5py = pytest.importorskip("h5py", reason="HDF5 import needs h5py")
    with h5py.File(path, "w") as f:
        for key, value in weights.items():
            layer, _, param = key.rpartition(".")
            if layer in drop:
                continue
            if layer == keras_layer and param == "weight":
                f.create_dataset(f"{layer}/kernel:0", data=value.T)
            else:
                f.create_dataset(f"{layer}/{param}", data=value)
        for name, value in (extra or {}).items():
            f.create_dataset(name, data=value)


def test_import_h5_reaches_remote_workers(tmp_path):
    t = PPOTrainer(config={**SMALL, "num_workers": 1}, env="CartPole-v1")
    try:
        new = {k: np.full_like(v, 0.25) for k, v in t.get_weights()["default_policy"].items()}
        new["_logits.weight"] = np.arange(new["_logits.weight"].size, dtype=np.float32).reshape(
            new["_logits.weight"].shape
        )
        path = str(tmp_path / "weights.h5")
        _write_h5(path, new, keras_layer="_logits")
        t.import_model(path)
        for source in (t.get_weights(), t.workers.remote_workers()[0].call("get_weights").result()):
            for k, v in source["default_policy"].items():
                np.testing.assert_array_equal(v, new[k], err_msg=k)
    finally:
        t.stop()


def test_import_h5_names_missing_and_unexpected_layers(trainer, tmp_path):
    path = str(tmp_path / "bad.h5")
    weights = trainer.get_weights()["default_policy"]
    _write_h5(path, weights, drop=("_logits",), extra={"decoder/weight": np.zeros(3)})
    with pytest.raises(
        ValueError, match=r"missing layers \['_logits'\], unexpected layers \['decoder'\]"
    ):
        trainer.import_policy_model_from_h5(path)


def test_import_h5_names_wrong_shapes(trainer, tmp_path):
    path = str(tmp_path / "shape.h5")
    weights = dict(trainer.get_weights()["default_policy"])
    weights["_logits.bias"] = np.zeros(7, np.float32)
    _write_h5(path, weights)
    with pytest.raises(ValueError, match=r"_logits.bias has shape \(7,\), expected \(2,\)"):
        trainer.import_policy_model_from_h5(path)


def test_import_model_needs_an_existing_file(trainer, tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        trainer.import_model(str(tmp_path / "nope.h5"))
