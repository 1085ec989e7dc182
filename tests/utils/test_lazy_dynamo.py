"""`defer_dynamo_import`: training, checkpoints and the optimiser's methods do not import
torch's compiler, and once anything imports it, torch's own `disable` wrappers are back.

Each case runs in a fresh interpreter: in the test process `torch._dynamo` may be imported
already (by the `torch_compile_learner` tests), and then the deferral is off by design."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

_PRELUDE = """
import sys
import torch
from torch import nn
from corral.utils import lazy_dynamo
from corral.utils.torch_utils import step_optimizer

OPTIMIZER_METHODS = ("add_param_group", "zero_grad", "state_dict", "load_state_dict")

def cache(name):
    return vars(getattr(torch.optim.Optimizer, name).__wrapped__).get("__dynamo_disable")

def torch_owns_caches():
    # Nothing of corral's is left: no cache yet, or torch's `torch._dynamo.disable`.
    for name in OPTIMIZER_METHODS:
        held = cache(name)
        assert held is None or getattr(held, "_torchdynamo_disable", False), (name, held)

def train(steps=3):
    torch.manual_seed(0)
    net = nn.Linear(4, 2)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2, fused=True)
    for _ in range(steps):
        opt.zero_grad()
        net(torch.ones(3, 4)).pow(2).sum().backward()
        step_optimizer(opt)
    opt.load_state_dict(opt.state_dict())
    return net, opt
"""

_CASES = {
    # The whole of a training run: trainer, updates, a checkpoint and its restore.
    "training": """
        from corral.agents.ppo import PPOTrainer
        trainer = PPOTrainer(
            config={"num_workers": 0, "train_batch_size": 256, "sgd_minibatch_size": 64,
                    "num_sgd_iter": 2, "rollout_fragment_length": 128},
            env="CartPole-v1",
        )
        trainer.train()
        trainer.restore(trainer.save(sys.argv[1]))
        train()
        assert "torch._dynamo" not in sys.modules, "training imported torch._dynamo"
        assert all(cache(name) is not None for name in OPTIMIZER_METHODS)
    """,
    # A compile after the optimiser was built: the import hands the wrappers back first.
    "compile": """
        net, opt = train()
        assert "torch._dynamo" not in sys.modules
        def step(x):
            opt.zero_grad()
            return net(x).sum()
        compiled = torch.compile(step, backend="eager")
        torch_owns_caches()
        assert torch.equal(compiled(torch.ones(2, 4)), step(torch.ones(2, 4)))
        opt.zero_grad()
        assert getattr(cache("zero_grad"), "_torchdynamo_disable", False)
    """,
    # `torch._dynamo` imported past the finder: the next call hands the wrapper back.
    "past_the_finder": """
        net, opt = train(1)
        sys.meta_path.remove(lazy_dynamo._FINDER)
        import torch._dynamo
        held = cache("zero_grad")
        assert held is not None and not hasattr(held, "_torchdynamo_disable")
        opt.zero_grad()
        torch_owns_caches()
        assert getattr(cache("zero_grad"), "_torchdynamo_disable", False)
    """,
}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_lazy_dynamo(case: str, tmp_path) -> None:
    script = _PRELUDE + textwrap.dedent(_CASES[case])
    proc = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
