"""A tokenizer added from outside the package: one class and one registry entry, and
preprocessing, training and translation use it (no type checks anywhere to extend)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from helpers import write_config

from transformer_cli.seams import TOKENIZERS
from transformer_cli.tokenizers.base import Tokenizer, strip_specials
from transformer_cli.tokenizers.vocab import SPECIALS, Vocab


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
