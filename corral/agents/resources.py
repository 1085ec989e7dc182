"""What a trainer of a given config asks Tune to reserve: one placement-group bundle each
for the driver, every rollout worker, every evaluation worker and every data-parallel
learner (`Trainer.default_resource_request`)."""

from __future__ import annotations


def resource_bundles(default_config: dict, config: dict) -> tuple[list[dict[str, float]], str]:
    """(bundles, placement strategy) of a trial of `config` over `default_config`.

    The driver bundle holds `num_cpus_for_driver` / `num_gpus`; each rollout and
    evaluation worker's `num_cpus_per_worker` / `num_gpus_per_worker` (evaluation
    workers' as `evaluation_config` overrides them) plus
    `custom_resources_per_worker`; each learner's `num_cpus_per_learner` /
    `num_gpus_per_learner`. With `_fake_gpus` no GPU is reserved.
    """
    cf = dict(default_config, **config)
    eval_cf = cf.get("evaluation_config") or {}
    fake = cf.get("_fake_gpus")
    # Fake GPUs are simulated on the driver's CPU: nothing to reserve for them.
    driver = {"CPU": cf["num_cpus_for_driver"], "GPU": 0 if fake else cf["num_gpus"]}
    bundles = [driver]
    # Fake GPUs on workers and learners are simulated on their CPUs too.
    custom = dict(cf.get("custom_resources_per_worker") or {})
    for _ in range(cf["num_workers"]):
        gpus = 0 if fake else cf["num_gpus_per_worker"]
        bundles.append({"CPU": cf["num_cpus_per_worker"], "GPU": gpus, **custom})
    if cf["evaluation_interval"]:
        for _ in range(cf["evaluation_num_workers"]):
            gpus = eval_cf.get("num_gpus_per_worker", cf["num_gpus_per_worker"])
            bundles.append(
                {
                    "CPU": eval_cf.get("num_cpus_per_worker", cf["num_cpus_per_worker"]),
                    "GPU": 0 if fake else gpus,
                    **custom,
                }
            )
    for _ in range(cf.get("num_learners") or 0):
        gpus = 0 if fake else cf.get("num_gpus_per_learner", 0)
        bundles.append({"CPU": cf.get("num_cpus_per_learner", 1), "GPU": gpus})
    return bundles, cf.get("placement_strategy", "PACK")
