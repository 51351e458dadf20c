"""Several models translating as one: one beam over their combined next-token distributions.

Each member keeps its own encoder output and caches (`EnsembleState`); at every step their
log-probabilities are combined, with weights w_i (normalised to sum to 1):

    "log"    sum_i w_i · log p_i(y)            a product of the members' distributions (Marian's
                                               ensembles); not renormalised while searching
    "prob"   log sum_i w_i · p_i(y)            their mixture (fairseq's)

Teacher forcing (`forward`, for loss and perplexity) renormalises "log" so that it is a
distribution. An ensemble of one model, or of a model with itself, gives exactly that
model's log-probabilities, hence its translations and scores.

Members must share their vocabularies (source and target, by `vocabulary_digest`: the same
ids for the same text): `check_same_vocabularies` refuses others in one line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, cast

import torch
from torch import Tensor, nn

from ..contracts.model import IncrementalState, TranslationModel
from ..errors import UsageError
from ..tokenizers.pair import TokenizerPair

Combine = Literal["log", "prob"]
COMBINATIONS: tuple[str, ...] = ("log", "prob")


@dataclass
class EnsembleState:
    """Each member's decoding state, in member order."""

    members: list[IncrementalState]

    def reorder(self, index: Tensor) -> EnsembleState:
        return EnsembleState([state.reorder(index) for state in self.members])


def check_same_vocabularies(tokenizers: Sequence[TokenizerPair], names: Sequence[str]) -> None:
    """Refuse members whose vocabularies differ (a UsageError naming the first that does)."""
    for side in ("tgt", "src"):
        first = _side_digest(tokenizers[0], side)
        for pair, name in zip(tokenizers[1:], names[1:]):
            if _side_digest(pair, side) != first:
                what = "target" if side == "tgt" else "source"
                raise UsageError(
                    f"cannot decode {names[0]} and {name} together: their {what} "
                    "vocabularies differ (an ensemble needs models trained with the "
                    "same tokenizers)"
                )


def _side_digest(pair: TokenizerPair, side: str) -> str:
    from ..tokenizers.pair import vocabulary_digest

    return vocabulary_digest({"side": getattr(pair, side).state()})


class Ensemble(nn.Module):
    """Models decoding together (see the module's docstring); it is an incremental decoder
    and a teacher-forcing model like each of them, so search and scoring take it as they
    take one model."""

    ARCHITECTURE: ClassVar[str] = "ensemble"
    weights: Tensor  # [members], summing to 1 (a buffer)

    def __init__(
        self, members: Sequence[TranslationModel[Any]], weights: Sequence[float] | None = None, combine: str = "log"
    ):
        super().__init__()
        if not members:
            raise UsageError("an ensemble needs at least one model")
        if combine not in COMBINATIONS:
            raise UsageError(f"the ensemble combination must be log or prob (got {combine!r})")
        weights = list(weights) if weights is not None else [1.0] * len(members)
        if len(weights) != len(members) or any(not w > 0 for w in weights):
            raise UsageError(f"ensemble weights: one positive number per model ({len(members)}), got {weights}")
        self.members = nn.ModuleList(members)  # type: ignore[arg-type]
        total = sum(weights)
        self.register_buffer("weights", torch.tensor([w / total for w in weights]), persistent=False)
        self.combine = combine
        first = members[0]
        self.src_ids, self.tgt_ids = first.src_ids, first.tgt_ids
        self.src_vocab_size, self.tgt_vocab_size = first.src_vocab_size, first.tgt_vocab_size
        # The shortest positional capacity bounds what the ensemble reads and writes.
        self.config = dataclasses.replace(first.config, max_len=min(m.config.max_len for m in members))

    @property
    def models(self) -> Sequence[TranslationModel[Any]]:
        """The members, typed as models (an nn.ModuleList yields plain modules)."""
        return cast("Sequence[TranslationModel[Any]]", self.members)

    def _combined(self, log_probs: list[Tensor]) -> Tensor:
        """Members' log-probabilities [..., vocab] each -> the ensemble's, as `combine` says."""
        stacked = torch.stack([lp.float() for lp in log_probs])  # [members, ..., vocab]
        w = self.weights.view(-1, *([1] * (stacked.dim() - 1)))
        if self.combine == "log":
            return (w * stacked).sum(0)
        top = stacked.max(0).values  # log sum_i w_i exp(lp_i - top) + top: exact for equal members
        return top + torch.log((w * torch.exp(stacked - top)).sum(0))

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: the ensemble's log-probabilities [batch, tgt_len, vocab] (a
        distribution: "log" is renormalised), which a cross-entropy takes as logits."""
        combined = self._combined([torch.log_softmax(m(src, tgt_in).float(), dim=-1) for m in self.models])
        return torch.log_softmax(combined, dim=-1) if self.combine == "log" else combined

    def start(self, src: Tensor) -> EnsembleState:
        return EnsembleState([m.start(src) for m in self.models])

    def step(self, tokens: Tensor, state: EnsembleState) -> tuple[Tensor, EnsembleState]:
        outs = [m.step(tokens, s) for m, s in zip(self.models, state.members)]
        return self._combined([lp for lp, _ in outs]), EnsembleState([s for _, s in outs])

    def cross_attention(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """The members' last-layer attention over the source, averaged over heads, then
        members by weight: [batch, 1, tgt_len, src_len]."""
        heads = [m.cross_attention(src, tgt_in).float().mean(1, keepdim=True) for m in self.models]
        return self._weighted_mean(heads)

    def _weighted_mean(self, tensors: list[Tensor]) -> Tensor:
        stacked = torch.stack(tensors)
        return (self.weights.view(-1, *([1] * (stacked.dim() - 1))) * stacked).sum(0)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
