"""Near-matches at decode time: a nearest-neighbour datastore of the decoder states of example
pairs (accepted corrections whose sources are close to the line: corrections/nearby.py), mixed
into the model's next-token distribution as it decodes (kNN-MT, Khandelwal et al. 2021, over a
datastore of the retrieved pairs alone, as Dai et al. 2023 do: a few hundred entries a line,
not a corpus).

Each example pair is read by the model under teacher forcing (`FeatureDecoder.features`): the
decoder's output at each target position is a key, the token that follows it the value. While
decoding, at each step and for each row, the `neighbours` nearest keys of that row's own line
(squared L2 distance d) give

    p_near(y) = sum over neighbours with value y of softmax(-d / temperature)
    p(y)      = lam * p_near(y) + (1 - lam) * p_model(y)
    lam       = weight * max(0, 1 - d_min / reach) * (1 - max_y p_model(y)) ** doubt

so a state far from every example's (d_min >= reach) decodes exactly as the model alone, the
examples weigh less where the model is sure of its next token (`doubt` > 0: a line that only
shares common words with them keeps what the model knows), and a line without examples is
decoded as without this module, bit for bit (its rows are not mixed). `reach` and
`temperature` are in the units of d, the squared distance between decoder outputs (chosen for
base.yaml's model on validation: docs/results.md, "Near-matches at once").
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ..data.batching import pad_batch
from ..tokenizers.pair import TokenizerPair
from .near_keys import Keys, KeysFile, rounded
from .outputs import Example, NearSettings

CACHED_EXAMPLES = 8192  # example pairs whose keys a backend keeps (LRU): ~15 tokens x d_model each


@dataclass
class Datastore:
    """The examples of a batch's lines, one row of entries a line (padded): entry (line, i) is
    `keys[line, i] -> values[line, i]`, of that line's example `example[line, i]`."""

    keys: Tensor  # [lines, entries, d_model]
    values: Tensor  # [lines, entries]
    example: Tensor  # [lines, entries]; -1: padding
    lines_with: Tensor  # [lines], bool: the line has entries
    keys_sq: Tensor  # [lines, entries]: each key's squared norm

    @classmethod
    def of(cls, per_line: Sequence[Sequence[Keys]], device: torch.device) -> Datastore:
        width = max((sum(len(k.values) for k in found) for found in per_line), default=0)
        d_model = next((k.keys.size(1) for found in per_line for k in found), 0)
        keys = torch.zeros(len(per_line), width, d_model)
        values = torch.zeros(len(per_line), width, dtype=torch.long)
        example = torch.full((len(per_line), width), -1, dtype=torch.long)
        for line, found in enumerate(per_line):
            at = 0
            for j, k in enumerate(found):
                n = len(k.values)
                keys[line, at : at + n], values[line, at : at + n], example[line, at : at + n] = k.keys, k.values, j
                at += n
        keys = keys.to(device)
        lines_with = (example >= 0).any(1)
        return cls(keys, values.to(device), example.to(device), lines_with.to(device), keys.square().sum(-1))


@dataclass
class NearState:
    """The model's state and the line each row decodes (an index into the batch's lines)."""

    inner: Any
    line: Tensor  # [rows]

    def reorder(self, index: Tensor) -> NearState:
        return NearState(self.inner.reorder(index), self.line.index_select(0, index))


class NearMatchDecoder:
    """A `FeatureDecoder` model decoding with a datastore (the module docstring): an incremental
    decoder as search takes one, which notes the examples each line drew on (`consulted`)."""

    def __init__(self, model: Any, store: Datastore, settings: NearSettings):
        self.model, self.store, self.settings = model, store, settings
        self.tgt_ids = model.tgt_ids
        examples = int(store.example.max()) + 1 if store.example.numel() else 0
        self._drawn_on = torch.zeros(len(store.lines_with), examples, dtype=torch.bool, device=store.keys.device)

    @property
    def consulted(self) -> list[set[int]]:
        """Per line, the examples whose entries were among a mixed row's neighbours (of weight > 0)."""
        return [set(row.nonzero().squeeze(1).tolist()) for row in self._drawn_on.cpu()]

    def start(self, src: Tensor) -> NearState:
        return NearState(self.model.start(src), torch.arange(src.size(0), device=src.device))

    def step(self, tokens: Tensor, state: NearState) -> tuple[Tensor, NearState]:
        log_probs, hidden, inner = self.model.step_features(tokens, state.inner)
        return self._mixed(log_probs, hidden.float(), state.line), NearState(inner, state.line)

    def _distances(self, hidden: Tensor, line: Tensor) -> Tensor:
        """Squared L2 distances of rows hidden [rows, d_model] (of lines `line`) to their own
        line's entries: [rows, entries] (inf for padding). Search keeps the rows of a line in
        one run of the same length (its beam; one row greedy), so the rows are set out
        [lines, rows a line, d_model] and met with every line's entries in one batched product,
        the store's keys never copied; runs of other lengths are met a line at a time."""
        store = self.store
        lines, counts = torch.unique_consecutive(line, return_counts=True)
        if bool((counts == counts[0]).all()):
            per_line = hidden.new_zeros(len(store.keys), int(counts[0]), hidden.size(1))
            per_line[lines] = hidden.view(len(lines), int(counts[0]), -1)
            dot = torch.bmm(per_line, store.keys.transpose(1, 2))[lines].flatten(0, 1)  # [rows, entries]
        else:
            dot = torch.cat([h @ store.keys[i].T for h, i in zip(torch.split(hidden, counts.tolist()), lines.tolist())])
        d = (hidden.square().sum(-1, keepdim=True) + store.keys_sq.index_select(0, line) - 2 * dot).clamp(min=0)
        return d.masked_fill(store.example.index_select(0, line) < 0, float("inf"))

    def _mixed(self, log_probs: Tensor, hidden: Tensor, line: Tensor) -> Tensor:
        """log_probs [rows, vocab] with each row's neighbours mixed in, in place (rows far from
        all of its line's entries, or of a line without any, unchanged)."""
        s = self.settings
        rows = self.store.lines_with.index_select(0, line).nonzero().squeeze(1)
        if not rows.numel():
            return log_probs
        line = line[rows]
        d = self._distances(hidden[rows], line)  # [rows, entries]
        near_d, near = d.topk(min(s.neighbours, d.size(1)), dim=1, largest=False)  # [rows, k]
        lam = s.weight * (1 - near_d[:, 0] / s.reach).clamp(min=0)  # [rows]
        if s.doubt:
            lam = lam * (1 - log_probs.max(1).values[rows].exp()).clamp(min=0) ** s.doubt
        mixed = (lam > 0).nonzero().squeeze(1)
        if not mixed.numel():
            return log_probs
        rows, line, near_d, near, lam = rows[mixed], line[mixed], near_d[mixed], near[mixed], lam[mixed, None]
        w = torch.softmax(-near_d / s.temperature, dim=1)  # [mixed, k]; 0 for padding
        tokens = self.store.values[line[:, None], near]  # [mixed, k]
        # Each neighbour's token with the weight of all the neighbours of that token: p_near(y).
        p_near = ((tokens[:, :, None] == tokens[:, None, :]).float() @ w[:, :, None])[:, :, 0]  # [mixed, k]
        # log((1 - lam) p_model(y)) for every y, then lam * p_near(y) added at the neighbours'
        # tokens: in place, the step's log_probs being this step's own (no copy of [rows, vocab]).
        at = torch.log(lam * p_near + (1 - lam) * log_probs[rows[:, None], tokens].exp())  # [mixed, k]
        if len(rows) == len(log_probs):  # every row (rows, from nonzero, are in order)
            log_probs += torch.log1p(-lam)
        else:
            log_probs.index_add_(0, rows, torch.log1p(-lam).expand(-1, log_probs.size(1)))
        log_probs[rows[:, None], tokens] = at
        used = w > 0  # [mixed, k]: the padding has none
        self._drawn_on[line[:, None].expand_as(near)[used], self.store.example[line[:, None], near][used]] = True
        return log_probs


class ExampleKeys:
    """The keys of example pairs as one model reads them, kept for the CACHED_EXAMPLES last used
    (a backend's: the same correction retrieved again is not read again). `encode` gives the
    sources' ids, ending in <eos>, as the backend encodes what it translates."""

    def __init__(
        self,
        model: Any,
        tokenizers: TokenizerPair,
        device: torch.device,
        encode: Callable[[list[str]], list[Tensor]],
    ):
        self.model, self.tokenizers, self.device, self.encode = model, tokenizers, device, encode
        self._kept: OrderedDict[tuple[str, str], Keys] = OrderedDict()

    def of(self, examples: Sequence[Example], ahead: KeysFile | None = None) -> list[Keys]:
        """Each example's keys: kept, else computed ahead (`ahead`: near_keys.py), else read in
        one batch (the model must be a `FeatureDecoder`)."""
        missing = list(dict.fromkeys((e.source, e.target) for e in examples if (e.source, e.target) not in self._kept))
        if missing and ahead is not None:
            self._kept.update(ahead.get(missing))
            missing = [pair for pair in missing if pair not in self._kept]
        if missing:
            for pair, keys in zip(missing, self.read(missing)):
                self._kept[pair] = keys
        out = []
        for e in examples:
            self._kept.move_to_end((e.source, e.target))
            out.append(self._kept[(e.source, e.target)])
        while len(self._kept) > CACHED_EXAMPLES:
            self._kept.popitem(last=False)
        return out

    @torch.inference_mode()
    def read(self, pairs: list[tuple[str, str]]) -> list[Keys]:
        """The pairs' keys as the model reads them now (rounded as the files keep them)."""
        ids, max_len = self.tokenizers.tgt.ids, self.model.config.max_len
        src = pad_batch(self.encode([s for s, _ in pairs]), self.tokenizers.src.ids.pad).to(self.device)
        targets = [t[: max_len - 1] for t in self.tokenizers.tgt.encode_batch([t for _, t in pairs])]
        tgt_in = pad_batch([torch.tensor([ids.sos, *t]) for t in targets], ids.pad).to(self.device)
        hidden = rounded(self.model.features(src, tgt_in).cpu())  # [pairs, tgt_len, d_model], float32
        return [Keys(hidden[i, : len(t) + 1], torch.tensor([*t, ids.eos])) for i, t in enumerate(targets)]
