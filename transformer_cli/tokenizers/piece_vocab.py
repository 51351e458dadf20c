"""`PieceVocabTokenizer`: SentencePiece's segmentation with the ids of a separate vocabulary,
the way Marian models keep their text (transformers' `MarianTokenizer`: `source.spm` and
`target.spm` cut a line into pieces, `vocab.json` gives every piece its id).

A piece the vocabulary lacks is `<unk>`. The vocabulary's end token (`</s>` in Marian's)
ends every source and target; its `<pad>` pads and also starts the decoder, as Marian's
`decoder_start_token_id` does, so `ids.sos == ids.pad` here (the search never produces it).
Decoding joins the pieces of the ids (special tokens left out) as SentencePiece writes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..contracts.tokenizer import ProgressCallback, SpecialIds, Tokenizer
from .base import strip_specials

# The special tokens of Marian's vocabularies, by role (tokenizer_config.json may rename them).
MARIAN_SPECIALS = {"unk": "<unk>", "pad": "<pad>", "sos": "<pad>", "eos": "</s>"}


class PieceVocabTokenizer(Tokenizer):
    """SentencePiece pieces -> ids of `itos` (the vocabulary, by id); `specials` names the
    tokens of each role (unk, pad, sos: the decoder's start, eos)."""

    kind = "piece-vocab"

    def __init__(
        self, model: bytes, itos: Sequence[str], specials: dict[str, str] | None = None, lowercase: bool = False
    ):
        import sentencepiece as spm

        self.model = model
        self.itos = list(itos)
        self.stoi = {piece: i for i, piece in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("the vocabulary holds a piece twice")
        self.specials = dict(specials or MARIAN_SPECIALS)
        missing = [token for token in self.specials.values() if token not in self.stoi]
        if missing:
            raise ValueError(f"the vocabulary lacks its special tokens {sorted(set(missing))}")
        self.ids = SpecialIds(*(self.stoi[self.specials[role]] for role in ("unk", "pad", "sos", "eos")))
        self.lowercase = lowercase
        self.sp = spm.SentencePieceProcessor(model_proto=model)
        self.threads = -1  # encode_batch's (see Tokenizer.set_threads)
        self._special_ids = {self.stoi[token] for token in self.specials.values()}

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def encode_batch(self, lines: Sequence[str], progress: ProgressCallback | None = None) -> list[list[int]]:
        text = [line.lower() if self.lowercase else line for line in lines]
        get, unk = self.stoi.get, self.ids.unk
        pieces_per_line = self.sp.encode(text, out_type=str, num_threads=self.threads)
        out = [[get(piece, unk) for piece in pieces] for pieces in pieces_per_line]
        if progress:
            progress(len(lines))
        return out

    def set_threads(self, threads: int) -> None:
        self.threads = threads

    def decode(self, ids: Sequence[int]) -> str:
        pieces = [
            self.itos[i]
            for i in strip_specials(ids, self.ids)
            if 0 <= i < len(self.itos) and i not in self._special_ids
        ]
        text: str = self.sp.decode_pieces(pieces)
        return text.replace("\u2581", " ").strip()

    def id_to_token(self, ids: Sequence[int]) -> list[str]:
        return [self.itos[int(i)] if 0 <= int(i) < len(self.itos) else self.specials["unk"] for i in ids]

    def state(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "model": self.model,
            "itos": self.itos,
            "specials": self.specials,
            "lowercase": self.lowercase,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> PieceVocabTokenizer:
        return cls(state["model"], state["itos"], state["specials"], state["lowercase"])
