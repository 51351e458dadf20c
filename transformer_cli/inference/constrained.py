"""Lexically constrained beam search: terms the output must contain, honoured at decode time.

The algorithm is Dynamic Beam Allocation (M. Post and D. Vilar, "Fast Lexically Constrained
Decoding with Dynamic Beam Allocation for Neural Machine Translation", NAACL 2018), written here
for tfm's incremental decoder (search.py) and one sentence at a time.

A constraint is a sequence of target token ids (a term's subwords) that must appear contiguously
in the output. Each hypothesis keeps, per constraint, its progress: the length of the longest
prefix of the constraint that ends its output (a Knuth-Morris-Pratt automaton: a partial match
that breaks falls back to the longest prefix still matching), the constraint's length once met.
Its bank is the number of constraint tokens it has met: the met constraints' lengths plus its
longest progress in the others. At each step

- the candidates are the 2·beam best continuations over the beam (as in beam_search), each
  hypothesis's best, and for each hypothesis the next token of every constraint it has not met
  (its first token, or the next one when the hypothesis is inside it);
- the beam's places are shared out across the banks 0..C (C: the constraints' tokens in all),
  so that hypotheses honouring more constraints survive although the model finds them less likely;
- `<eos>` is allowed only to hypotheses that have met every constraint, until the output limit
  forces it on all: the best hypothesis is then returned with the constraints it lacks reported
  (never dropped silently).

Hypotheses end as in beam_search, with banks: the allocation run over all candidates ends the
`<eos>` ones it picks, run over the others it gives the next beam; the search stops with
`beam_size` ended hypotheses, or at the limit. With no constraints there is one bank, and this
is beam_search exactly. Constraints that no output can hold (`unplaceable`) are reported at once
and not searched for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ..contracts.model import IncrementalDecoder, State
from ..contracts.strategy import Hypothesis
from ..contracts.tokenizer import SpecialIds
from .search import _force_eos, _never_start, finished

Progress = tuple[int, ...]  # per searched constraint: its tokens matched so far (its length: met)


@dataclass
class ConstrainedResult:
    """One sentence's translation under constraints, which are named by their index in the
    list given."""

    hypothesis: Hypothesis
    placed: list[int]  # the constraints the output contains
    not_placed: list[int]  # the others: the unplaceable ones and those the limit left no room for
    unplaceable: list[int]  # not searched for: no output within the limit can contain them


def unplaceable(constraints: Sequence[Sequence[int]], limit: int, ids: SpecialIds) -> list[int]:
    """Indices of the constraints no output can contain: those holding a special token (`<unk>`:
    the term is not in the vocabulary; `<pad>`, `<sos>`, `<eos>`) or more tokens than an output
    limit of `limit` tokens, `<eos>` included, leaves room for."""
    specials = {ids.unk, ids.pad, ids.sos, ids.eos}
    return [i for i, c in enumerate(constraints) if len(c) > limit - 1 or specials.intersection(c)]


class _Tracker:
    """The constraints searched for, and how a hypothesis's progress in them moves."""

    def __init__(self, constraints: list[tuple[int, ...]]):
        self.constraints = constraints
        self.fallback = [_fallback(c) for c in constraints]
        self.total = sum(len(c) for c in constraints)  # the banks are 0..total

    def start(self) -> Progress:
        return (0,) * len(self.constraints)

    def advance(self, progress: Progress, token: int) -> Progress:
        """The progress once `token` is output."""
        return tuple(
            p if p == len(c) else _match(c, fallback, p, token)
            for c, fallback, p in zip(self.constraints, self.fallback, progress)
        )

    def met(self, progress: Progress) -> list[int]:
        """Indices (among the searched constraints) of those met."""
        return [j for j, (c, p) in enumerate(zip(self.constraints, progress)) if p == len(c)]

    def bank(self, progress: Progress) -> int:
        """Constraint tokens met: the met constraints' lengths plus the longest partial match."""
        met = sum(p for c, p in zip(self.constraints, progress) if p == len(c))
        return met + max((p for c, p in zip(self.constraints, progress) if p < len(c)), default=0)

    def wanted(self, progress: Progress) -> list[int]:
        """The next token of each constraint not met, in constraint order, without repeats."""
        return list(dict.fromkeys(c[p] for c, p in zip(self.constraints, progress) if p < len(c)))


def _fallback(c: tuple[int, ...]) -> list[int]:
    """Knuth-Morris-Pratt's failure function: for each i, the length of the longest proper
    prefix of c[:i + 1] that is also its suffix."""
    out, k = [0] * len(c), 0
    for i in range(1, len(c)):
        while k and c[i] != c[k]:
            k = out[k - 1]
        if c[i] == c[k]:
            k += 1
        out[i] = k
    return out


def _match(c: tuple[int, ...], fallback: list[int], p: int, token: int) -> int:
    """The progress in `c` after `token`, from progress p < len(c)."""
    while p and c[p] != token:
        p = fallback[p - 1]
    return p + 1 if c[p] == token else 0


@dataclass(frozen=True)
class _Candidate:
    score: float  # the hypothesis's log-probability with the token
    parent: int  # its row in the beam
    token: int
    progress: Progress  # after the token (<eos>: the parent's)
    bank: int


def _candidates(totals: Tensor, progress: list[Progress], tracker: _Tracker, k: int, eos: int) -> list[_Candidate]:
    """totals [rows, vocab]: each continuation's log-probability. The 2k best over the beam, each
    row's best and each row's next constraint tokens, without repeats or impossible (-inf) ones,
    best first (equal scores in that order)."""
    rows, vocab = totals.shape
    flat = totals.flatten()
    top = flat.topk(min(2 * k, rows * vocab)).indices.tolist()
    pairs = [divmod(i, vocab) for i in top] + list(enumerate(totals.argmax(dim=1).tolist()))
    pairs += [(r, token) for r, p in enumerate(progress) for token in tracker.wanted(p)]
    unique = list(dict.fromkeys(pairs))
    scores = flat[torch.tensor([r * vocab + t for r, t in unique], device=totals.device)].tolist()
    found = sorted(((s, r, t) for s, (r, t) in zip(scores, unique) if s > float("-inf")), key=lambda x: -x[0])
    out = []
    for s, r, t in found:
        after = progress[r] if t == eos else tracker.advance(progress[r], t)
        out.append(_Candidate(s, r, t, after, tracker.bank(after)))
    return out


def _allocate(banks: list[int], n_banks: int, k: int) -> list[int]:
    """Which candidates (best first; `banks`: each one's bank) take the beam's k places: each bank
    is given k // n_banks, the k % n_banks left one each to the highest banks; the places a bank
    cannot fill pass to the bank below, and those the lowest cannot fill to the best candidates
    not yet taken. Their indices, best first."""
    members: list[list[int]] = [[] for _ in range(n_banks)]
    for i, b in enumerate(banks):
        members[b].append(i)
    taken, spare = [], 0
    for b in reversed(range(n_banks)):
        room = k // n_banks + int(b >= n_banks - k % n_banks) + spare
        taken += members[b][:room]
        spare = room - len(members[b][:room])
    chosen = set(taken)
    taken += [i for i in range(len(banks)) if i not in chosen][:spare]
    return sorted(taken)


def _allow_eos(log_probs: Tensor, may_end: list[bool], at_limit: bool, eos: int) -> Tensor:
    """log_probs [rows, vocab] with <eos> forced at the limit, and before it impossible for the
    rows not in `may_end` (those with constraints still to meet)."""
    if at_limit:
        return _force_eos(log_probs, torch.ones(log_probs.size(0), dtype=torch.bool, device=log_probs.device), eos)
    if not all(may_end):
        log_probs[torch.tensor([not m for m in may_end], device=log_probs.device), eos] = float("-inf")
    return log_probs


@torch.inference_mode()
def constrained_beam_search(
    model: IncrementalDecoder[State],
    src: Tensor,
    limits: Tensor,
    constraints: Sequence[Sequence[int]],
    beam_size: int,
    length_penalty: float = 1.0,
) -> ConstrainedResult:
    """The best output for ONE source sentence, src [1, src_len] (limits [1]: its output limit,
    `<eos>` included), that contains each of `constraints` (target token id sequences, one token
    or more each) contiguously, by Dynamic Beam Allocation (see the module's docstring). Ended
    hypotheses are scored as in beam_search (`length_penalty`); the one returned is the best of
    those placing the most constraints."""
    if src.size(0) != 1:
        raise ValueError(f"constrained beam search takes one sentence, not {src.size(0)}")
    if not all(constraints):
        raise ValueError("a constraint is one token or more")
    limit, k, ids = int(limits[0]), beam_size, model.tgt_ids
    skipped = unplaceable(constraints, limit, ids)
    searched = [i for i in range(len(constraints)) if i not in skipped]
    tracker = _Tracker([tuple(constraints[i]) for i in searched])
    # k identical rows, as in beam_search (the same batch shape gives the same floats); only the
    # first is expanded.
    state = model.start(src).reorder(torch.zeros(k, dtype=torch.long, device=src.device))
    tokens = torch.full((k,), ids.sos, dtype=torch.long, device=src.device)
    scores = torch.full((k,), float("-inf"), device=src.device)
    scores[0] = 0.0
    prefixes: list[list[int]] = [[]] * k
    progress = [tracker.start()] * k
    ended: list[tuple[Hypothesis, Progress]] = []
    for t in range(limit):
        log_probs, state = model.step(tokens, state)
        may_end = [not tracker.wanted(p) for p in progress]
        log_probs = _allow_eos(_never_start(log_probs, ids), may_end, t + 1 >= limit, ids.eos)
        candidates = _candidates(scores[:, None] + log_probs, progress, tracker, k, ids.eos)
        for i in _allocate([c.bank for c in candidates], tracker.total + 1, k):
            if candidates[i].token == ids.eos:
                c = candidates[i]
                ended.append((finished(prefixes[c.parent], c.score, length_penalty), c.progress))
        going = [c for c in candidates if c.token != ids.eos]
        beam = [going[i] for i in _allocate([c.bank for c in going], tracker.total + 1, k)]
        if len(ended) >= k or not beam:
            break
        state = state.reorder(torch.tensor([c.parent for c in beam], device=src.device))
        tokens = torch.tensor([c.token for c in beam], device=src.device)
        scores = torch.tensor([c.score for c in beam], device=src.device, dtype=scores.dtype)
        prefixes = [[*prefixes[c.parent], c.token] for c in beam]
        progress = [c.progress for c in beam]
    return _result(ended, tracker, searched, skipped, len(constraints))


def _result(
    ended: list[tuple[Hypothesis, Progress]], tracker: _Tracker, searched: list[int], skipped: list[int], n: int
) -> ConstrainedResult:
    """The ended hypothesis placing the most constraints, the best scored of those (the first
    ended of equals, as beam_search's sort keeps them), and what it placed."""
    best, progress = max(ended, key=lambda e: (len(tracker.met(e[1])), e[0].score))
    placed = [searched[j] for j in tracker.met(progress)]
    return ConstrainedResult(best, placed, [i for i in range(n) if i not in placed], skipped)
