"""BatchLoss, the loss of one training batch, on its own: a real (small) model and a real batch."""

import torch

from transformer_cli.data.batching import collate
from transformer_cli.data.shards import EncodedSplit
from transformer_cli.loss import sequence_loss
from transformer_cli.model.transformer import Seq2SeqTransformer
from transformer_cli.model.transformer_config import TransformerConfig
from transformer_cli.tokenizers.vocab import PAD, TFM_IDS, Framing
from transformer_cli.training.step import BatchLoss


def model_and_batch(dropout: float):
    torch.manual_seed(0)
    net = Seq2SeqTransformer(
        TransformerConfig(
            d_model=32, n_heads=4, n_encoder_layers=1, n_decoder_layers=1, d_ff=64, max_len=64, dropout=dropout
        ),
        60,
        60,
    )
    g = torch.Generator().manual_seed(1)
    pairs = [
        (torch.randint(4, 60, (n,), generator=g).tolist(), torch.randint(4, 60, (n + 2,), generator=g).tolist())
        for n in (3, 7, 5)
    ]  # unequal lengths: the batch is padded
    split = EncodedSplit.from_lists([p[0] for p in pairs], [p[1] for p in pairs])
    return net.train(), collate(split, [0, 1, 2], Framing(TFM_IDS, TFM_IDS), 64)


def test_the_loss_is_the_label_smoothed_cross_entropy_of_the_targets():
    net, batch = model_and_batch(dropout=0.0)
    loss, nll = BatchLoss(PAD, label_smoothing=0.1)(net, batch, None)
    expected = sequence_loss(net(batch.src, batch.tgt_in), batch.tgt_out, PAD, 0.1)
    assert torch.allclose(loss, expected[0]) and torch.allclose(nll, expected[1])
    assert (batch.tgt_out == PAD).any() and loss.requires_grad and not nll.requires_grad
    assert loss > nll  # smoothing spreads probability over the vocabulary


def test_r_drop_adds_the_consistency_of_two_dropout_draws():
    net, batch = model_and_batch(dropout=0.0)
    plain, r_drop = BatchLoss(PAD), BatchLoss(PAD, rdrop_alpha=5.0)
    assert torch.allclose(r_drop(net, batch, None)[0], plain(net, batch, None)[0], rtol=1e-5)  # KL = 0
    noisy, batch = model_and_batch(dropout=0.3)
    loss, nll = r_drop(noisy, batch, None)
    assert loss > nll > 0  # no smoothing: the difference is alpha * KL / 2 of the two draws
    loss.backward()
    assert all(p.grad is not None for p in noisy.parameters() if p.requires_grad)
