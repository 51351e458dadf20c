"""Greedy and beam search over an incremental decoder, batched over many sentences.

The searches need only two calls of the model (the incremental part of contracts/model.py):
`start(src) -> state` and `step(tokens, state) -> (log_probs [rows, vocab], state)`, where
`state.reorder(index)` selects or repeats rows. Sentences that have ended are dropped from the
batch, so a batch costs as much as its longest output, and no more.

Lengths count output tokens including `<eos>`; a sentence that reaches its limit gets `<eos>`
forced at its last position, in greedy and beam search alike (so beam 1 == greedy). A start
token that is also the padding token (Marian's `<pad>`) is never produced: its log-probability
is set to -inf after the softmax, as transformers' generation config for such models asks
(`bad_words_ids`), so they decode exactly as in transformers. tfm's own `<sos>` is left to the
model, which never learns to produce it, so a tfm model decodes exactly as its CTranslate2
export.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..contracts.model import IncrementalDecoder, State
from ..contracts.strategy import Hypothesis
from ..contracts.tokenizer import SpecialIds


def finished(tokens: list[int], log_prob: float, length_penalty: float) -> Hypothesis:
    """A hypothesis that has produced <eos>, scored as beam search ranks them:
    log_prob / length**length_penalty, the length counting <eos> (0 = raw log-probability)."""
    return Hypothesis(tokens, log_prob, log_prob / (len(tokens) + 1) ** length_penalty)


def output_limits(src_lengths: Tensor, a: float, b: int, cap: int) -> Tensor:
    """Per-sentence output limit (tokens incl. <eos>): a·src_len + b, at most `cap`."""
    return (src_lengths.float() * a + b).long().clamp(min=1, max=cap)


def _never_start(log_probs: Tensor, ids: SpecialIds) -> Tensor:
    """A start token that doubles as padding made impossible (in place; log_probs [rows, vocab])."""
    if ids.sos == ids.pad:
        log_probs[:, ids.sos] = float("-inf")
    return log_probs


def _force_eos(log_probs: Tensor, at_limit: Tensor, eos: int) -> Tensor:
    """Rows where `at_limit` may only produce <eos> (id `eos`)."""
    if at_limit.any():
        forced = torch.full_like(log_probs[0], float("-inf"))
        forced[eos] = 0.0
        log_probs = torch.where(at_limit[:, None], forced, log_probs)
    return log_probs


Choose = Callable[[Tensor], tuple[Tensor, Tensor]]  # log_probs [rows, vocab] -> (their values, tokens)


def greedy_search(model: IncrementalDecoder[State], src: Tensor, limits: Tensor) -> list[Hypothesis]:
    """The most likely next token at each step, for each sentence of src [batch, src_len]."""
    return _one_path(model, src, limits, lambda log_probs: log_probs.max(dim=-1))


def sample_search(
    model: IncrementalDecoder[State],
    src: Tensor,
    limits: Tensor,
    topk: int,
    temperature: float,
    generator: torch.Generator,
) -> list[Hypothesis]:
    """A next token drawn at each step from the `topk` most likely (0: all), their
    probabilities sharpened (temperature < 1) or flattened (> 1); a hypothesis's log_prob is
    the model's own, untempered."""

    def draw(log_probs: Tensor) -> tuple[Tensor, Tensor]:
        scaled = log_probs / temperature
        if 0 < topk < scaled.size(-1):
            kth = scaled.topk(topk, dim=-1).values[:, -1:]
            scaled = scaled.masked_fill(scaled < kth, float("-inf"))
        tokens = torch.multinomial(torch.softmax(scaled, dim=-1), 1, generator=generator).squeeze(1)
        return log_probs.gather(1, tokens[:, None]).squeeze(1), tokens

    return _one_path(model, src, limits, draw)


@torch.inference_mode()
def _one_path(model: IncrementalDecoder[State], src: Tensor, limits: Tensor, choose: Choose) -> list[Hypothesis]:
    """One output per sentence of src [batch, src_len], a token chosen by `choose` at each step
    (greedy, sampling); finished sentences leave the batch."""
    batch, (sos, eos) = src.size(0), (model.tgt_ids.sos, model.tgt_ids.eos)
    state = model.start(src)
    tokens = torch.full((batch,), sos, dtype=torch.long, device=src.device)
    alive = torch.arange(batch, device=src.device)  # original index of each row still decoding
    out: list[list[int]] = [[] for _ in range(batch)]
    log_prob = [0.0] * batch
    limits = limits.to(src.device)
    t = 0
    while alive.numel():
        log_probs, state = model.step(tokens, state)
        log_probs = _force_eos(_never_start(log_probs, model.tgt_ids), limits[alive] <= t + 1, eos)
        best, tokens = choose(log_probs)
        for i, tok, lp in zip(alive.tolist(), tokens.tolist(), best.tolist()):
            log_prob[i] += lp
            if tok != eos:
                out[i].append(tok)
        keep = (tokens != eos).nonzero().squeeze(1)
        if keep.numel() < alive.numel():
            alive, tokens, state = alive[keep], tokens[keep], state.reorder(keep)
        t += 1
    return [Hypothesis(o, lp, lp / (len(o) + 1)) for o, lp in zip(out, log_prob)]


@torch.inference_mode()
def beam_search(
    model: IncrementalDecoder[State],
    src: Tensor,
    limits: Tensor,
    beam_size: int,
    length_penalty: float = 1.0,
    n_best: int = 1,
) -> list[list[Hypothesis]]:
    """Keep the `beam_size` best prefixes per sentence; return each sentence's `n_best`.

    A hypothesis ends when <eos> is among the top `beam_size` candidates; a sentence is done
    when it has `beam_size` ended hypotheses. Ended ones are ranked by
    log_prob / length**length_penalty (length incl. <eos>; 0 = raw log-probability).
    """
    batch, k = src.size(0), beam_size
    device, (sos, eos) = src.device, (model.tgt_ids.sos, model.tgt_ids.eos)
    limits = limits.to(device)
    beam_rows = torch.arange(batch, device=device).repeat_interleave(k)  # k state rows per sentence
    state = model.start(src).reorder(beam_rows)
    alive = torch.arange(batch, device=device)  # original index of each sentence still searching
    scores = torch.full((batch, k), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all beams start identical: expand only the first
    prefixes = torch.empty(batch, k, 0, dtype=torch.long, device=device)
    tokens = torch.full((batch * k,), sos, dtype=torch.long, device=device)
    ended: list[list[Hypothesis]] = [[] for _ in range(batch)]
    t = 0
    while alive.numel():
        n = alive.numel()
        log_probs, state = model.step(tokens, state)
        at_limit = (limits[alive] <= t + 1).repeat_interleave(k)
        log_probs = _force_eos(_never_start(log_probs, model.tgt_ids), at_limit, eos)
        vocab = log_probs.size(-1)
        candidates = (scores[:, :, None] + log_probs.view(n, k, vocab)).view(n, k * vocab)
        top_scores, top_index = candidates.topk(min(2 * k, k * vocab), dim=1)
        top_beam, top_token = top_index // vocab, top_index % vocab
        is_eos = top_token == eos
        # End hypotheses whose <eos> ranks among the first k candidates.
        sent, rank = (is_eos[:, :k] & (top_scores[:, :k] > float("-inf"))).nonzero(as_tuple=True)
        if sent.numel():  # sent: index among the alive sentences; rank: among its candidates
            words = prefixes[sent, top_beam[sent, rank]].tolist()
            for i, w, lp in zip(alive[sent].tolist(), words, top_scores[sent, rank].tolist()):
                ended[i].append(finished(w, lp, length_penalty))
        # Continue with the k best candidates that are not <eos> (stable: keeps rank order).
        order = torch.sort(is_eos.to(torch.int8), dim=1, stable=True).indices[:, :k]
        beam = top_beam.gather(1, order)
        scores = top_scores.gather(1, order)
        tokens_2d = top_token.gather(1, order)
        prefixes = torch.cat(
            [prefixes.gather(1, beam[:, :, None].expand(-1, -1, prefixes.size(2))), tokens_2d[:, :, None]], dim=2
        )
        parents = (torch.arange(n, device=device)[:, None] * k + beam).flatten()
        done = torch.tensor([len(ended[i]) >= k for i in alive.tolist()], device=device)
        done |= limits[alive] <= t + 1  # <eos> was forced: nothing can continue
        keep = (~done).nonzero().squeeze(1)
        kept_rows = (keep[:, None] * k + torch.arange(k, device=device)).flatten()  # [len(keep)·k]
        state = state.reorder(parents[kept_rows])
        alive, scores, prefixes = alive[keep], scores[keep], prefixes[keep]
        tokens = tokens_2d[keep].flatten()
        t += 1
    return [sorted(h, key=lambda x: -x.score)[:n_best] for h in ended]
