"""MarianMT models made locally with transformers itself (no hub here): random weights of a
few shapes, a SentencePiece model fitted on a corpus, Marian's vocabulary layout."""

from __future__ import annotations

import io
import json
from pathlib import Path

import torch


def fit_spm(lines: list[str], vocab_size: int) -> bytes:
    """A SentencePiece model as Marian's are: its own ids are not the model's (vocab.json's are)."""
    import sentencepiece as spm

    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=buffer,
        vocab_size=vocab_size,
        model_type="unigram",
        minloglevel=2,
        character_coverage=1.0,
        hard_vocab_limit=False,
    )
    return buffer.getvalue()


def marian_vocab(*models: bytes) -> dict[str, int]:
    """Marian's layout: </s> 0, <unk> 1, the pieces of the SentencePiece models, <pad> last."""
    import sentencepiece as spm

    pieces: list[str] = []
    for model in models:
        sp = spm.SentencePieceProcessor(model_proto=model)
        for i in range(sp.get_piece_size()):
            piece = sp.id_to_piece(i)
            if not (sp.is_control(i) or sp.is_unknown(i)) and piece not in pieces:
                pieces.append(piece)
    tokens = ["</s>", "<unk>", *pieces, "<pad>"]
    return {t: i for i, t in enumerate(tokens)}


def make_marian(
    folder: Path,
    src_lines: list[str],
    tgt_lines: list[str],
    *,
    shared: bool = True,
    tied: bool = True,
    activation: str = "swish",
    d_model: int = 32,
    layers=(2, 1),
    vocab: int = 120,
    seed: int = 0,
    scale_embedding: bool = True,
    eos_bias: float = 4.0,
) -> Path:
    """A random MarianMTModel saved by transformers with its tokenizer files, in `folder`.
    Weights are drawn wider than transformers' default (std 0.02) so that next-token choices
    are clear-cut, and the output bias is random, `eos_bias` added to </s>'s so that some
    sentences end before a limit and others reach it."""
    from transformers import MarianConfig, MarianMTModel

    folder.mkdir(parents=True, exist_ok=True)
    src_spm = fit_spm(src_lines, vocab)
    tgt_spm = src_spm if shared else fit_spm(tgt_lines, vocab + 13)
    src_vocab = marian_vocab(src_spm) if not shared else marian_vocab(src_spm, tgt_spm)
    tgt_vocab = src_vocab if shared else marian_vocab(tgt_spm)
    (folder / "source.spm").write_bytes(src_spm)
    (folder / "target.spm").write_bytes(tgt_spm)
    (folder / "vocab.json").write_text(json.dumps(src_vocab))
    if not shared:
        (folder / "target_vocab.json").write_text(json.dumps(tgt_vocab))
    (folder / "tokenizer_config.json").write_text(json.dumps({"separate_vocabs": not shared, "model_max_length": 128}))
    pad = len(tgt_vocab) - 1
    cfg = MarianConfig(
        vocab_size=len(src_vocab),
        decoder_vocab_size=len(tgt_vocab),
        d_model=d_model,
        encoder_layers=layers[0],
        decoder_layers=layers[1],
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=2 * d_model,
        decoder_ffn_dim=2 * d_model,
        max_position_embeddings=128,
        pad_token_id=pad,
        decoder_start_token_id=pad,
        eos_token_id=0,
        forced_eos_token_id=0,
        share_encoder_decoder_embeddings=shared,
        tie_word_embeddings=tied,
        scale_embedding=scale_embedding,
        activation_function=activation,
        init_std=0.3,
    )
    torch.manual_seed(seed)
    model = MarianMTModel(cfg)
    with torch.no_grad():
        model.final_logits_bias.normal_(0.0, 1.0)
        model.final_logits_bias[0, 0] += eos_bias
    model.save_pretrained(folder)
    return folder


def hf_generate(
    folder: Path, lines: list[str], num_beams: int, max_new_tokens: int, length_penalty: float = 1.0, n_best: int = 1
) -> list[list[list[int]]]:
    """transformers' own tokenization and generate: each line's n_best outputs (ids, without
    the start token and the final </s>), tfm's search settings spelled out."""
    from transformers import MarianMTModel, MarianTokenizer

    tokenizer = MarianTokenizer.from_pretrained(folder)
    model = MarianMTModel.from_pretrained(folder).eval()
    batch = tokenizer(lines, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(
            **batch,
            num_beams=num_beams,
            num_return_sequences=n_best,
            max_new_tokens=max_new_tokens,
            length_penalty=length_penalty,
            early_stopping=True,
            do_sample=False,
            no_repeat_ngram_size=0,
            bad_words_ids=[[model.config.decoder_start_token_id]],
            forced_eos_token_id=model.config.eos_token_id,
        )
    results = []
    for row in out.tolist():
        ids = row[1:]  # the start token
        ids = ids[: ids.index(model.config.eos_token_id)] if model.config.eos_token_id in ids else ids
        results.append([i for i in ids if i != model.config.pad_token_id])
    return [results[i : i + n_best] for i in range(0, len(results), n_best)]
