"""The model contract: what training, search, teacher forcing, export and checkpoints need of
a translation model, whatever its architecture; and what an architecture is (`Architecture`,
one seams.ARCHITECTURES entry: a builder of such models and the settings class it reads).

A model is a torch module that also has
- `ARCHITECTURE`: the name its family is registered under (model/builders.py; checkpoints record the
  name the config gave, model.architecture, which may also be a dotted path);
- `config`: its settings (its architecture's `model:` class, a config.ModelConfig, or what its
  builder made of it: `config.max_len` is the positions backends truncate to);
- `src_vocab_size`, `tgt_vocab_size`, and `src_ids`, `tgt_ids`: where the vocabularies keep
  their special tokens (from the tokenizers; the source's `<pad>` is masked, search starts
  from the target's `<sos>` and ends at its `<eos>`);
- teacher forcing: `model(src [batch, src_len], tgt_in [batch, tgt_len])` -> logits
  `[batch, tgt_len, tgt_vocab]` (training, validation loss, corpus NLL);
- incremental decoding: `start(src) -> state`, `step(tokens [rows], state) -> (log-probabilities
  [rows, tgt_vocab], state)`, with `state.reorder(index)` selecting or repeating rows (search);
  the state's type is the model's own (an `IncrementalState`: the protocols are generic in it,
  and `TranslationModel[Any]` is a model whatever its state);
- `cross_attention(src, tgt_in)` -> `[batch, heads, tgt_len, src_len]` (attention plots);
- `num_parameters()`.

A model may also give what a near-match datastore needs (`FeatureDecoder`, checked structurally:
inference/near.py reads it when it is there): `features(src, tgt_in)` -> the decoder's output
`[batch, tgt_len, d_model]` under teacher forcing, and `step_features(tokens, state)` ->
(log-probabilities, that output `[rows, d_model]`, state).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

from .tokenizer import SpecialIds

if TYPE_CHECKING:  # the contract names torch's types; importing it imports no torch
    from torch import Tensor, nn

State = TypeVar("State", bound="IncrementalState")  # a model's own (DecoderState, EnsembleState)


class IncrementalState(Protocol):
    """What a model carries between decoding steps (its caches, masks, position)."""

    def reorder(self: State, index: Tensor) -> State:
        """Rows `index` [new_rows] of the batch (beam search follows parents, greedy drops
        finished sentences)."""


class IncrementalDecoder(Protocol[State]):
    """What search needs: the target's special ids and the two incremental calls (a model,
    or several decoding together), the state one gives the next."""

    tgt_ids: SpecialIds

    def start(self, src: Tensor) -> State: ...

    def step(self, tokens: Tensor, state: State) -> tuple[Tensor, State]: ...


class TranslationModel(IncrementalDecoder[State], Protocol[State]):
    """The contract above, as a structural type (Seq2SeqTransformer is one)."""

    ARCHITECTURE: ClassVar[str]
    config: Any
    src_vocab_size: int
    tgt_vocab_size: int
    src_ids: SpecialIds
    training: bool

    def __call__(self, src: Tensor, tgt_in: Tensor) -> Tensor: ...

    def cross_attention(self, src: Tensor, tgt_in: Tensor) -> Tensor: ...

    def num_parameters(self) -> int: ...

    # The torch module methods tfm uses.
    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = ..., assign: bool = ...) -> Any: ...

    def parameters(self, recurse: bool = ...) -> Iterator[nn.Parameter]: ...

    def modules(self) -> Iterator[nn.Module]: ...

    def to(self, *args: Any, **kwargs: Any) -> Any: ...

    def train(self, mode: bool = ...) -> Any: ...

    def eval(self) -> Any: ...


@runtime_checkable
class FeatureDecoder(Protocol):
    """The optional part of the contract a near-match datastore reads (module docstring)."""

    def features(self, src: Tensor, tgt_in: Tensor) -> Tensor: ...

    def step_features(self, tokens: Tensor, state: Any) -> tuple[Tensor, Tensor, Any]: ...


Settings = TypeVar("Settings")  # an architecture's settings class (a config.ModelConfig)


@dataclass(frozen=True)
class Architecture(Generic[Settings]):
    """A model family (model.architecture): `build(its settings, source and target vocabulary
    sizes, their special ids)` makes a model with fresh weights; `settings`, the dataclass a
    config's `model:` section becomes (config.ModelConfig extended: model/builders.py's
    register_architecture checks that; the class names the registries, so it is not named here)."""

    build: Callable[[Settings, int, int, SpecialIds, SpecialIds], TranslationModel[Any]]
    settings: type[Settings]
