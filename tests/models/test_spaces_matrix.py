"""Every available algorithm x observation space x action space: it trains for one tiny
iteration, or refuses with an UnsupportedSpaceException that names the space.

The cells come from ``scripts/spaces_matrix.py`` (which writes ``docs/spaces.md``), so the
documented matrix and the tested one cannot drift apart. Algorithms are taken from the
registry at collection time: new ones join the matrix as soon as they are registered.
"""

import importlib.util
from pathlib import Path

import pytest

_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "spaces_matrix.py"
_spec = importlib.util.spec_from_file_location("spaces_matrix", _SCRIPT)
matrix = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(matrix)

CELLS = [
    pytest.param(algo, obs_name, act_name, id=f"{algo}-{obs_name}-{act_name}")
    for algo in matrix.available_algorithms()
    for obs_name in matrix.OBSERVATION_SPACES
    for act_name in matrix.ACTION_SPACES
]


@pytest.mark.parametrize(("algorithm", "obs_name", "act_name"), CELLS)
def test_trains_or_names_the_unsupported_space(algorithm, obs_name, act_name):
    obs_space = matrix.OBSERVATION_SPACES[obs_name]
    act_space = matrix.ACTION_SPACES[act_name]
    result = matrix.run_cell(algorithm, obs_space, act_space)
    assert not result.startswith("ERROR"), result
    if algorithm == "PPO":
        # The reference: PPO's policy has a model and a distribution for every space here.
        assert result == "yes", result
    if result != "yes":
        # The message must say which space was refused.
        assert str(obs_space) in result or str(act_space) in result, result
