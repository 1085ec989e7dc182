"""corral Trainers under Ray Tune, and data-parallel learners as Ray actors.

Runs on a local Ray instance (`ray.init(num_cpus=2)`); skipped when Ray Tune's
dependencies are not installed.
"""

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the `ray` extra is not installed")
try:
    from ray import tune
except ImportError as e:  # ray core without ray[tune]'s dependencies
    pytest.skip(f"Ray Tune is not usable here: {e}", allow_module_level=True)

from corral.agents.ppo import PPOTrainer  # noqa: E402
from corral.evaluation.ray_backend import RayWorker  # noqa: E402
from corral.tune.ray_adapter import as_ray_trainable  # noqa: E402

TINY = {
    "env": "CartPole-v1",
    "num_workers": 0,
    "train_batch_size": 128,
    "rollout_fragment_length": 128,
    "sgd_minibatch_size": 64,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [16]},
    "log_level": "ERROR",
}


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_learners_as_ray_actors_train_ppo():
    config = {
        **TINY,
        "backend": "ray",
        "num_learners": 2,
        "train_batch_size": 1000,
        "rollout_fragment_length": 1000,
        "sgd_minibatch_size": 128,
        "num_sgd_iter": 6,
        "lr": 1e-3,
        "model": {"fcnet_hiddens": [32, 32]},
        "seed": 1,
    }
    trainer = PPOTrainer(config=config)
    try:
        learners = trainer.learner_group.remote_learners
        assert [type(h) for h in learners] == [RayWorker, RayWorker]
        rewards = [trainer.train()["episode_reward_mean"] for _ in range(5)]
        assert max(rewards[-2:]) > 1.5 * rewards[0], rewards
        a, b = (
            h.call("policy_weights", "default_policy").result()["modules"]["model"]
            for h in learners
        )
        assert all(np.array_equal(a[k], b[k]) for k in a)
    finally:
        trainer.stop()


def test_default_resource_request_is_a_placement_group_factory():
    request = PPOTrainer.default_resource_request(
        {"num_workers": 2, "num_learners": 2, "num_gpus_per_learner": 0.5, "num_gpus": 0}
    )
    assert isinstance(request, tune.PlacementGroupFactory)
    assert request.bundles == [{"CPU": 1}, {"CPU": 1}, {"CPU": 1}, {"CPU": 1, "GPU": 0.5}] + [
        {"CPU": 1, "GPU": 0.5}
    ]
    assert request.required_resources == {"CPU": 5, "GPU": 1}
    adapter = as_ray_trainable(PPOTrainer)
    assert adapter.default_resource_request({"num_workers": 0}).bundles == [{"CPU": 1}]
    with pytest.raises(TypeError, match="corral Trainable class"):
        as_ray_trainable(dict)


def test_tuner_grid_search_and_checkpoint_restore(tmp_path):
    tuner = tune.Tuner(
        PPOTrainer,
        param_space={**TINY, "lr": tune.grid_search([1e-3, 1e-4])},
        tune_config=tune.TuneConfig(metric="episode_reward_mean", mode="max"),
        run_config=tune.RunConfig(
            stop={"training_iteration": 2},
            storage_path=str(tmp_path),
            verbose=0,
            checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True),
        ),
    )
    results = tuner.fit()
    assert len(results) == 2 and not results.errors
    assert sorted(r.config["lr"] for r in results) == [1e-4, 1e-3]
    best = results.get_best_result()
    assert best.metrics["training_iteration"] == 2
    assert best.metrics["episode_reward_mean"] == max(
        r.metrics["episode_reward_mean"] for r in results
    )
    restored = PPOTrainer.from_checkpoint(best.checkpoint.path)
    try:
        assert restored.iteration == 2 and restored.config["lr"] == best.config["lr"]
        restored.train()
    finally:
        restored.stop()


def test_tune_run_and_restore_into_tune(tmp_path):
    analysis = tune.run(
        PPOTrainer,
        config={**TINY, "lr": tune.grid_search([1e-3, 1e-4])},
        stop={"training_iteration": 2},
        metric="episode_reward_mean",
        mode="max",
        # Only the final checkpoint: with one per iteration, the best by the (noisy)
        # metric could be iteration 1's, and the restore below checks iteration 2.
        checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=0, checkpoint_at_end=True),
        storage_path=str(tmp_path),
        verbose=0,
    )
    assert len(analysis.trials) == 2
    assert all(t.last_result["training_iteration"] == 2 for t in analysis.trials)
    checkpoint = analysis.best_checkpoint
    # Tune's own restore path: the adapter loads the corral checkpoint Tune kept.
    trainable = as_ray_trainable(PPOTrainer)(config=analysis.best_config)
    try:
        trainable.restore(checkpoint)
        assert trainable.trainer.iteration == 2
        assert trainable.train()["training_iteration"] == 3
    finally:
        trainable.stop()


def test_a_trials_workers_and_learners_use_the_trials_own_bundles(tmp_path):
    # 2 CPUs in all: the trial's group (driver + 1 worker, or driver + 1 learner) takes
    # both, so the worker and the learner must go into its bundles, not a second group.
    for extra in ({"num_workers": 1}, {"num_learners": 1}):
        config = {**TINY, "backend": "ray", **extra}
        request = PPOTrainer.default_resource_request(config)
        assert request.required_resources == {"CPU": 2}
        analysis = tune.run(
            PPOTrainer,
            config=config,
            stop={"training_iteration": 1},
            storage_path=str(tmp_path),
            verbose=0,
        )
        assert analysis.trials[0].last_result["training_iteration"] == 1


def test_ray_tune_imported_before_corral_takes_corral_classes_too():
    import subprocess
    import sys

    code = (
        "import ray.tune\n"
        "from ray.tune.experiment import Experiment\n"
        "from ray.tune.registry import get_trainable_cls\n"
        "from corral.agents.ppo import PPOTrainer\n"
        "name = Experiment.register_if_needed(PPOTrainer)\n"
        "print(name, get_trainable_cls(name).corral_class.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["PPO", "PPOTrainer"]


def test_import_corral_does_not_import_ray():
    import subprocess
    import sys

    code = (
        "import sys, corral\n"
        "from corral.agents.ppo import PPOTrainer\n"
        "print(any(m == 'ray' or m.startswith('ray.') for m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_corral_tune_run_with_backend_ray_hands_trials_to_ray_tune(tmp_path):
    from corral import tune as corral_tune

    analysis = corral_tune.run(
        PPOTrainer,
        config={**TINY, "backend": "ray", "lr": corral_tune.grid_search([1e-3, 1e-4])},
        stop={"training_iteration": 2},
        checkpoint_at_end=True,
        local_dir=str(tmp_path),
        metric="episode_reward_mean",
        mode="max",
        verbose=0,
    )
    assert [t.status for t in analysis.trials] == ["TERMINATED", "TERMINATED"]
    assert sorted(t.config["lr"] for t in analysis.trials) == [1e-4, 1e-3]
    assert all(t.last_result["training_iteration"] == 2 for t in analysis.trials)
    best = analysis.best_trial
    assert best.metric_analysis["training_iteration"]["max"] == 2
    assert analysis.get_trial_checkpoints_paths(best, "training_iteration")[-1][1] == 2
    restored = PPOTrainer.from_checkpoint(analysis.best_checkpoint)
    try:
        assert restored.iteration == 2
    finally:
        restored.stop()
