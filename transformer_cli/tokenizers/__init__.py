"""Text of one language to ids and back: the tokenizer kinds (seams.TOKENIZERS), the pair a
model translates with, and what they share. The lowest layer: it imports only the modules
beside the sub-packages (config, errors, seams), and every layer above encodes through it.

    base.py          the Tokenizer interface, a saved state rebuilt by its kind
    word.py          spaCy words + a vocabulary (the notebook's pipeline)
    subword.py       SentencePiece BPE/unigram with tfm's special ids
    piece_vocab.py   SentencePiece pieces looked up in a separate vocabulary (Marian's)
    pair.py          TokenizerPair: both sides + the source truecaser, what checkpoints store
    truecase.py      the source truecaser (decode.recase)
    vocab.py         Vocab, SpecialIds, Framing
    text_marks.py    the marks only tfm writes into training text, stripped from input
"""
