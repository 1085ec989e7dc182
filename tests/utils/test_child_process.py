"""Forked children never garbage-collect what they inherited (`start_forked`)."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import pytest

from corral.agents.pg import PGTrainer
from corral.utils.child_process import start_forked

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the local backend forks on Linux only"
)


class Finalized:
    """Unreachable garbage once made (it references itself): its finalizer leaves a file
    named after the process that ran it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.me = self

    def __del__(self) -> None:
        (self.folder / str(os.getpid())).touch()


def test_a_forked_worker_never_finalizes_the_drivers_garbage(tmp_path):
    gc.collect()
    gc.disable()  # the garbage must still be there when the worker forks
    try:
        Finalized(tmp_path)
        trainer = PGTrainer(
            config={"env": "CartPole-v1", "num_workers": 1, "rollout_fragment_length": 10}
        )
        try:
            worker = trainer.workers.remote_workers()[0]
            child = worker.apply(lambda w: (gc.collect(), os.getpid())[1]).result(timeout=60)
            assert child != os.getpid()
            assert not (tmp_path / str(child)).exists()
        finally:
            trainer.stop()
    finally:
        gc.enable()
    gc.collect()
    assert (tmp_path / str(os.getpid())).exists()  # the driver's own collection ran it


def test_a_bare_fork_child_never_finalizes_the_parents_garbage(tmp_path):
    gc.collect()
    gc.disable()
    try:
        Finalized(tmp_path)
        frozen = gc.get_freeze_count()  # corral.core._heap's, when a trainer was imported
        pid = start_forked(os.fork)
        if pid == 0:  # the child
            gc.enable()
            gc.collect()
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert not (tmp_path / str(pid)).exists()
        assert gc.get_freeze_count() == frozen  # the parent's frozen heap as it was
        assert not gc.isenabled()  # as the test left it before the fork
    finally:
        gc.enable()
    gc.collect()
    assert (tmp_path / str(os.getpid())).exists()


def _draws(worker):
    import numpy as np
    import torch

    return torch.rand(4).tolist(), np.random.rand(4).tolist()


def test_forked_workers_without_a_seed_draw_numbers_of_their_own():
    """A forked child inherits the driver's numpy and torch generators; without a seed
    each worker must still get streams of its own (else all of them sample the same
    actions and exploration noise)."""
    trainer = PGTrainer(
        config={"env": "CartPole-v1", "num_workers": 2, "rollout_fragment_length": 10}
    )
    try:
        a, b = (w.apply(_draws).result(timeout=60) for w in trainer.workers.remote_workers())
    finally:
        trainer.stop()
    assert a[0] != b[0]  # torch
    assert a[1] != b[1]  # numpy


def test_forked_workers_with_a_seed_draw_the_same_numbers_in_every_run():
    runs = []
    for _ in range(2):
        trainer = PGTrainer(
            config={
                "env": "CartPole-v1",
                "num_workers": 2,
                "rollout_fragment_length": 10,
                "seed": 5,
            }
        )
        try:
            runs.append(
                [w.apply(_draws).result(timeout=60) for w in trainer.workers.remote_workers()]
            )
        finally:
            trainer.stop()
    assert runs[0] == runs[1]
    assert runs[0][0] != runs[0][1]  # each worker its own seed
