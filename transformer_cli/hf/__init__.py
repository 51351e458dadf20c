"""Hugging Face models in and out: MarianMT folders (`transformers`' format) read as tfm models
and tfm models written as MarianMT folders, from the files themselves (config.json, safetensors,
SentencePiece models, vocab.json): tfm never imports `transformers` (tests compare with it).

    marian.py     the correspondence: config.json <-> model settings, weight names and shapes
    folder.py     reading a folder (or fetching a Hub id) into a tfm Checkpoint
    export.py     `tfm export --format hf`: a Checkpoint into a folder, atomically, with sha256s
"""
