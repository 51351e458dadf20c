"""loss.py: the pad-ignoring cross-entropy (summed; label smoothing as torch defines it; the NLL
beside it without gradient) and R-Drop's symmetric KL over the non-pad positions."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from transformer_cli.loss import sequence_loss, symmetric_kl


def test_label_smoothed_loss_matches_torch():
    torch.manual_seed(0)
    logits, target = torch.randn(3, 5, 11), torch.randint(0, 11, (3, 5))
    target[0, 3:] = 1  # PAD
    loss, nll = sequence_loss(logits, target, pad_id=1, label_smoothing=0.1)
    flat_logits, flat_t = logits.view(-1, 11), target.view(-1)
    expected = F.cross_entropy(flat_logits, flat_t, ignore_index=1, reduction="sum", label_smoothing=0.1)
    assert torch.allclose(loss, expected, atol=1e-4)
    assert torch.allclose(nll, F.cross_entropy(flat_logits, flat_t, ignore_index=1, reduction="sum"), atol=1e-4)


def test_symmetric_kl_is_r_drops_term_over_non_pad_positions():
    torch.manual_seed(0)
    a, b, target = torch.randn(3, 5, 11), torch.randn(3, 5, 11), torch.randint(2, 11, (3, 5))
    target[0, 3:] = 1  # PAD
    log_p, log_q = F.log_softmax(a, -1), F.log_softmax(b, -1)
    kl_pq = F.kl_div(log_q, log_p, log_target=True, reduction="none").sum(-1)  # KL(P‖Q)
    kl_qp = F.kl_div(log_p, log_q, log_target=True, reduction="none").sum(-1)
    expected = (0.5 * (kl_pq + kl_qp))[target != 1].sum()
    assert torch.allclose(symmetric_kl(a, b, target, pad_id=1), expected, atol=1e-5)
    assert symmetric_kl(a, a, target, pad_id=1) == 0
    b[0, 3:] += 100.0  # differences at pad positions do not count
    assert torch.allclose(symmetric_kl(a, b, target, pad_id=1), expected, atol=1e-5)


def test_without_smoothing_the_loss_is_the_nll_and_bf16_logits_sum_in_fp32():
    torch.manual_seed(1)
    logits = torch.randn(2, 4, 7, requires_grad=True)
    target = torch.tensor([[3, 4, 1, 1], [5, 6, 2, 1]])
    loss, nll = sequence_loss(logits, target, pad_id=1)
    assert torch.equal(loss, nll) and loss.requires_grad and not nll.requires_grad
    loss.backward()
    assert logits.grad is not None and torch.all(logits.grad[0, 2:] == 0)  # pads: no gradient
    smoothed, smoothed_nll = sequence_loss(logits, target, pad_id=1, label_smoothing=0.1)
    assert torch.allclose(smoothed_nll, nll) and not torch.allclose(smoothed, nll)
    half, _ = sequence_loss(logits.detach().bfloat16(), target, pad_id=1)
    assert half.dtype == torch.float32 and torch.allclose(half, nll, rtol=2e-2)
