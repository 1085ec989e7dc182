"""`log_sys_usage`: `result["perf"]` holds the machine's load, as in RLlib."""

from corral.agents.pg import PGTrainer

SMALL = {"num_workers": 0, "train_batch_size": 64, "rollout_fragment_length": 64}


def test_results_report_cpu_and_memory_load():
    trainer = PGTrainer(config=SMALL, env="CartPole-v1")
    try:
        perf = trainer.train()["perf"]
    finally:
        trainer.stop()
    assert set(perf) >= {"cpu_util_percent", "ram_util_percent"}
    assert 0.0 <= perf["cpu_util_percent"] <= 100.0 and 0.0 < perf["ram_util_percent"] <= 100.0


def test_log_sys_usage_false_reports_nothing():
    trainer = PGTrainer(config={**SMALL, "log_sys_usage": False}, env="CartPole-v1")
    try:
        assert "perf" not in trainer.train()
    finally:
        trainer.stop()


def test_usable_cores_is_the_affinity_mask():
    import os

    from corral.utils.sys_usage import usable_cores

    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert usable_cores() == expected >= 1
