"""tokenizers/text_marks.py: the marks only tfm writes into training text (tags of synthetic
sources, the filler of noised back-translations): private-use characters a tokenizer keeps as
one token, stripped from what a user gives a model to translate."""

from __future__ import annotations

import unicodedata

from helpers import fit_tokenizers, sentence_pairs

from transformer_cli.config import TokenizerConfig
from transformer_cli.tokenizers.text_marks import (
    BACK_TRANSLATION_TAG,
    FILLER,
    FORWARD_TRANSLATION_TAG,
    MARKS,
    strip_marks,
    tagged,
)


def test_marks_are_private_use_characters_and_come_off_every_input():
    assert len(set(MARKS)) == 3 and all(unicodedata.category(m) == "Co" for m in MARKS)
    assert all(unicodedata.normalize("NFKC", m) == m for m in MARKS)
    line = tagged(BACK_TRANSLATION_TAG, f"Ein {FILLER} sieht einen Ball.")
    assert line == f"{BACK_TRANSLATION_TAG} Ein {FILLER} sieht einen Ball."
    assert strip_marks(line) == " Ein  sieht einen Ball."
    plain = "Ein Mann."
    assert strip_marks(plain) is plain  # the common case costs no copy
    assert strip_marks(f"{FORWARD_TRANSLATION_TAG}x") == "x"


def test_a_tokenizer_fitted_on_tagged_text_keeps_a_tag_one_token():
    pairs = sentence_pairs(200)
    sources = [tagged(BACK_TRANSLATION_TAG, de) if i % 2 else de for i, (de, _) in enumerate(pairs)]
    tokenizers = fit_tokenizers(TokenizerConfig(vocab_size=80), "de", "en", sources, [en for _, en in pairs])
    ids = tokenizers.src.encode(sources[1])
    tokens = tokenizers.src.id_to_token(ids)
    assert tokens[0] == f"\u2581{BACK_TRANSLATION_TAG}"  # the tag: one piece of its own
    assert not any(BACK_TRANSLATION_TAG in token for token in tokens[1:])
    assert tokenizers.src.ids.unk not in ids
