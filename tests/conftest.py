import pytest


@pytest.fixture(autouse=True)
def _results_in_tmp(tmp_path, monkeypatch):
    """Trainers write their logdirs under a temporary folder, never in $HOME."""
    monkeypatch.setenv("CORRAL_RESULTS_DIR", str(tmp_path / "corral_results"))
