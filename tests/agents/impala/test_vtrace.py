"""V-trace against a hand computation (with clipping) and its on-policy reduction."""

import math

import pytest
import torch

from corral.agents.impala import vtrace_torch as vtrace


def test_hand_computed_example_with_clipping():
    # One trajectory of 3 steps (B = 1), gamma 0.9, no episode end.
    g = 0.9
    rewards = [1.0, 0.0, 2.0]
    values = [0.5, 1.0, 0.2]
    boot = 0.3
    rhos = [2.0, 0.5, 1.5]  # pi/mu: the first and last are truncated
    res = vtrace.from_importance_weights(
        torch.log(torch.tensor(rhos, dtype=torch.float64))[:, None],
        torch.full((3, 1), g, dtype=torch.float64),
        torch.tensor(rewards, dtype=torch.float64)[:, None],
        torch.tensor(values, dtype=torch.float64)[:, None],
        torch.tensor([boot], dtype=torch.float64),
        clip_rho_threshold=1.0,
        clip_pg_rho_threshold=1.2,
    )
    # rho_t = min(1, rho), c_t = min(1, rho):   rho = [1, .5, 1], c = [1, .5, 1]
    d2 = 1.0 * (2.0 + g * 0.3 - 0.2)  # 2.07
    d1 = 0.5 * (0.0 + g * 0.2 - 1.0)  # -0.41
    d0 = 1.0 * (1.0 + g * 1.0 - 0.5)  # 1.4
    a2 = d2
    a1 = d1 + g * 0.5 * a2
    a0 = d0 + g * 1.0 * a1
    vs = [0.5 + a0, 1.0 + a1, 0.2 + a2]
    assert res.vs[:, 0].tolist() == pytest.approx(vs)
    assert vs == pytest.approx([2.36935, 1.5215, 2.27])
    # Advantages: min(1.2, rho) (r + g v_{s+1} - V), the last bootstrapped with V(x_T).
    adv = [
        1.2 * (1.0 + g * vs[1] - 0.5),
        0.5 * (0.0 + g * vs[2] - 1.0),
        1.2 * (2.0 + g * boot - 0.2),
    ]
    assert res.pg_advantages[:, 0].tolist() == pytest.approx(adv)
    assert not res.vs.requires_grad


def test_on_policy_reduces_to_n_step_returns():
    torch.manual_seed(0)
    T, B, g = 6, 4, 0.95
    rewards = torch.randn(T, B, dtype=torch.float64)
    values = torch.randn(T, B, dtype=torch.float64)
    boot = torch.randn(B, dtype=torch.float64)
    discounts = torch.full((T, B), g, dtype=torch.float64)
    discounts[2, 1] = 0.0  # an episode of column 1 ends after step 2
    res = vtrace.from_importance_weights(
        torch.zeros(T, B, dtype=torch.float64), discounts, rewards, values, boot
    )
    for b in range(B):
        for s in range(T):
            # The n-step return from s to the end of the rollout (or the episode).
            ret, scale = 0.0, 1.0
            for t in range(s, T):
                ret += scale * float(rewards[t, b])
                scale *= float(discounts[t, b])
            ret += scale * float(boot[b])
            assert float(res.vs[s, b]) == pytest.approx(ret)
            nxt = float(res.vs[s + 1, b]) if s + 1 < T else float(boot[b])
            adv = float(rewards[s, b] + discounts[s, b] * nxt - values[s, b])
            assert float(res.pg_advantages[s, b]) == pytest.approx(adv)


def test_flat_pieces_equal_per_piece_time_major():
    torch.manual_seed(1)
    lengths = [3, 5, 1]
    n = sum(lengths)
    log_rhos = torch.randn(n, dtype=torch.float64) * 0.5
    rewards = torch.randn(n, dtype=torch.float64)
    values = torch.randn(n, dtype=torch.float64)
    discounts = torch.full((n,), 0.9, dtype=torch.float64)
    discounts[7] = 0.0  # the second piece ends its episode
    starts = torch.zeros(n, dtype=torch.bool)
    starts[[0, 3, 8]] = True
    boots = torch.tensor([0.7, -2.0, 0.1], dtype=torch.float64)
    flat = vtrace.from_importance_weights_flat(
        log_rhos, discounts, rewards, values, starts, boots, 1.0, 1.0
    )
    begin = 0
    for i, length in enumerate(lengths):
        sl = slice(begin, begin + length)
        ref = vtrace.from_importance_weights(
            log_rhos[sl, None],
            discounts[sl, None],
            rewards[sl, None],
            values[sl, None],
            boots[i : i + 1],
            1.0,
            1.0,
        )
        assert flat.vs[sl].tolist() == pytest.approx(ref.vs[:, 0].tolist())
        assert flat.pg_advantages[sl].tolist() == pytest.approx(ref.pg_advantages[:, 0].tolist())
        begin += length


def test_from_logits_uses_target_over_behaviour_ratio():
    logits_mu = torch.tensor([[[0.0, 0.0]], [[1.0, 0.0]]])
    logits_pi = torch.tensor([[[2.0, 0.0]], [[0.0, 0.0]]])
    actions = torch.tensor([[0], [1]])
    res = vtrace.from_logits(
        logits_mu,
        logits_pi,
        actions,
        torch.full((2, 1), 0.9),
        torch.ones(2, 1),
        torch.zeros(2, 1),
        torch.zeros(1),
    )
    pi0 = math.exp(2) / (math.exp(2) + 1)
    mu1 = 1 / (math.e + 1)
    assert res.log_rhos[:, 0].tolist() == pytest.approx([math.log(pi0 / 0.5), math.log(0.5 / mu1)])


def test_rank_mismatch_is_a_clear_error():
    with pytest.raises(ValueError, match="bootstrap_value"):
        vtrace.from_importance_weights(
            torch.zeros(3, 2),
            torch.zeros(3, 2),
            torch.zeros(3, 2),
            torch.zeros(3, 2),
            torch.zeros(3, 2),
        )
