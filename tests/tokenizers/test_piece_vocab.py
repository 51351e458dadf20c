"""tokenizers/piece_vocab.py: PieceVocabTokenizer, SentencePiece's pieces looked up in a
separate vocabulary as Marian models keep them: pieces the vocabulary lacks are `<unk>`, its
`<pad>` also starts the decoder, decoding joins the pieces without the specials, and it comes
with a model: it is never fitted."""

from __future__ import annotations

import pytest
from helpers import sentence_pairs
from hf.marian_helpers import fit_spm, marian_vocab

from transformer_cli.config import TokenizerConfig
from transformer_cli.errors import UsageError
from transformer_cli.tokenizers.base import tokenizer_from_state
from transformer_cli.tokenizers.pair import LinesText
from transformer_cli.tokenizers.piece_vocab import MARIAN_SPECIALS, PieceVocabTokenizer

LINES = [de for de, _ in sentence_pairs(200)]


@pytest.fixture(scope="module")
def marian():
    """A SentencePiece model and Marian's vocabulary of it (</s> 0, <unk> 1, ..., <pad> last)."""
    model = fit_spm(LINES, 60)
    vocab = marian_vocab(model)
    return model, sorted(vocab, key=vocab.get)


def test_pieces_get_the_vocabularys_ids_and_decode_back(marian):
    model, itos = marian
    tok = PieceVocabTokenizer(model, itos)
    assert (tok.ids.eos, tok.ids.unk, tok.ids.pad) == (0, 1, len(itos) - 1)
    assert tok.ids.sos == tok.ids.pad  # Marian's decoder starts at <pad>
    ids = tok.encode_batch(LINES[:10])
    assert [tok.decode(i) for i in ids] == LINES[:10]
    assert tok.decode([tok.ids.sos, *ids[0], tok.ids.eos, *ids[1]]) == LINES[0]
    assert tok.id_to_token(ids[0]) == [itos[i] for i in ids[0]] and tok.id_to_token([10**6]) == ["<unk>"]


def test_a_piece_the_vocabulary_lacks_is_unk(marian):
    model, itos = marian
    assert "\u2581ball" in itos
    tok = PieceVocabTokenizer(model, [p for p in itos if p != "\u2581ball"])
    assert tok.ids.unk not in tok.encode("Ein hut.") and tok.ids.unk in tok.encode("Ein ball.")
    lower = PieceVocabTokenizer(model, itos, lowercase=True)
    assert lower.encode("EIN MANN") == lower.encode("ein mann")


def test_its_vocabulary_must_hold_its_specials_once(marian):
    model, itos = marian
    with pytest.raises(ValueError, match=r"lacks its special tokens \['</s>'\]"):
        PieceVocabTokenizer(model, [p for p in itos if p != "</s>"])
    with pytest.raises(ValueError, match="holds a piece twice"):
        PieceVocabTokenizer(model, [*itos, itos[3]])
    renamed = {**MARIAN_SPECIALS, "eos": "<eos>"}
    tok = PieceVocabTokenizer(model, [*itos[:-1], "<eos>", itos[-1]], renamed)
    assert tok.id_to_token([tok.ids.eos]) == ["<eos>"]


def test_its_state_rebuilds_it_and_it_is_never_fitted(marian):
    model, itos = marian
    tok = PieceVocabTokenizer(model, itos, lowercase=True)
    again = tokenizer_from_state(tok.state())
    assert isinstance(again, PieceVocabTokenizer) and again.state() == tok.state()
    assert again.encode(LINES[0]) == tok.encode(LINES[0])
    with pytest.raises(UsageError, match="a piece-vocab tokenizer is not fitted on a corpus"):
        PieceVocabTokenizer.fit(TokenizerConfig(kind="piece-vocab"), ("de", "en"), LinesText(LINES, LINES))
