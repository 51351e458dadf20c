"""tokenizers/base.py: what every kind shares: the seeded sample fitting reads, ids without
their specials, a state rebuilt by its kind; and a tokenizer added from outside the package:
one class and one registry entry, and preprocessing, training and translation use it (no type
checks anywhere to extend). (What the interface itself gives every kind: test_tokenizer.py.)"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from helpers import write_config

from transformer_cli.contracts.tokenizer import SpecialIds, Tokenizer
from transformer_cli.seams import TOKENIZERS
from transformer_cli.tokenizers.base import sample_pairs, strip_specials, tokenizer_from_state
from transformer_cli.tokenizers.vocab import SPECIALS, TFM_IDS, Vocab


class Characters(Tokenizer):
    """Every character a token (a toy: it shows the seam, not a good tokenizer)."""

    kind = "characters"

    def __init__(self, itos: Sequence[str], lowercase: bool = False):
        self.vocab = Vocab(itos)
        self.ids, self.lowercase = self.vocab.ids, lowercase

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @classmethod
    def fit(cls, cfg, langs, text):
        counts = Counter()
        for chunk_counts in text.map(_characters, _no_setup, ()):  # in the worker processes
            counts.update(chunk_counts)
        shared = cls([*SPECIALS, *sorted(counts)], cfg.lowercase)
        return shared, shared  # one object twice: a joint vocabulary

    def encode_batch(self, lines, progress=None):
        return [self.vocab.lookup(list(line)) for line in lines]

    def decode(self, ids):
        return "".join(self.vocab.tokens(strip_specials(ids, self.ids)))

    def id_to_token(self, ids):
        return self.vocab.tokens(ids)

    def state(self) -> dict[str, Any]:
        return {"kind": self.kind, "itos": self.vocab.itos, "lowercase": self.lowercase}

    @classmethod
    def from_state(cls, state):
        return cls(state["itos"], state["lowercase"])


def _no_setup() -> None:
    pass


def _characters(chunk: tuple[list[str], list[str]]) -> Counter:
    sources, targets = chunk
    return Counter("".join(sources) + "".join(targets))


@pytest.mark.slow
def test_a_tokenizer_registered_from_outside_is_fitted_trained_on_and_translates(tmp_path, corpus_dir):
    from transformer_cli.api import load
    from transformer_cli.config_loading import load_config
    from transformer_cli.training.session import run_training

    TOKENIZERS.register(Characters.kind, Characters)
    try:
        path = write_config(
            tmp_path / "chars.yaml",
            tmp_path,
            corpus_dir,
            tokenizer={"kind": "characters"},
            model={"share_embeddings": True, "tie_output": True, "max_len": 128},
            data={"train_max_len": 100},
            train={"epochs": 1, "threads": 1},
        )
        run_training(load_config(str(path)))
        model = load(tmp_path / "checkpoints" / "chars" / "best.pt", device="cpu")
        assert model.backend.tokenizers.src.kind == "characters"
        assert isinstance(model.translate(["Ein Hund."])[0], str)
    finally:
        TOKENIZERS.unregister(Characters.kind)


def test_ids_without_specials_stop_at_the_first_eos():
    assert strip_specials([2, 7, 1, 8, 3, 9], TFM_IDS) == [7, 8]
    elsewhere = SpecialIds(unk=0, pad=9, sos=9, eos=5)  # Marian's: <pad> also starts the decoder
    assert strip_specials([9, 0, 6, 5, 6], elsewhere) == [0, 6]  # <unk> is kept


def test_the_fitting_sample_is_seeded_and_holds_everything_when_it_can():
    chunks = [([f"s{i}" for i in range(j, j + 10)], [f"t{i}" for i in range(j, j + 10)]) for j in range(0, 100, 10)]
    small = sample_pairs(iter(chunks), 1000)
    assert small[0] == [f"s{i}" for i in range(100)]  # fewer pairs than the size: all, in order
    a, b = sample_pairs(iter(chunks), 20), sample_pairs(iter(chunks), 20)
    assert a == b and len(a[0]) == 20 and len(set(a[0])) == 20
    assert all(s[1:] == t[1:] for s, t in zip(*a))  # pairs stay pairs
    assert a[0] != small[0][:20]  # a sample of the whole, not its head
    stops = []
    sample_pairs(iter(chunks), 5, check_stop=lambda: stops.append(1))
    assert len(stops) == len(chunks)


def test_a_state_is_rebuilt_by_its_kind():
    TOKENIZERS.register(Characters.kind, Characters)
    try:
        again = tokenizer_from_state(Characters([*SPECIALS, "x"], lowercase=True).state())
        assert isinstance(again, Characters) and again.lowercase and again.vocab.itos[-1] == "x"
    finally:
        TOKENIZERS.unregister(Characters.kind)
    with pytest.raises(ValueError, match=r"unknown tokenizer kind 'characters' \(known: piece-vocab, "):
        tokenizer_from_state({"kind": "characters"})
