"""`tfm export --format hf`: a tfm model as a MarianMT folder that transformers loads
(`MarianMTModel.from_pretrained`, `MarianTokenizer.from_pretrained`) and CTranslate2's
`ct2-transformers-converter` converts.

    config.json, generation_config.json     architecture; decoding (start token, forced end,
                                            beams, length penalty, the start token never
                                            generated, as tfm's search does; max_length: tfm's
                                            cap, max_len tokens + the start token. tfm's limit
                                            per sentence, max_len_a * n + max_len_b, has no
                                            equivalent there: docs/huggingface.md)
    model.safetensors                       the weights (marian.to_hf), tied ones stored once
    source.spm, target.spm                  the SentencePiece models
    vocab.json (+ target_vocab.json)        piece -> id, `<pad>` last (Marian's layout)
    tokenizer_config.json                   MarianTokenizer, the special tokens' names
    tfm-tokenizer.json (+ tfm-tokenizer.spm.*.model)   tfm's own tokenizers (the truecaser with them)
    tfm-export.json                         format, engine "transformers", the source checkpoint
                                            and its config and metrics, how ids and features were
                                            reordered, and every file's sha256

With the last two, `tfm` reads the folder back as exactly the model it came from (same
weights, tokenizers and settings); transformers ignores them.

Written into a work folder renamed into place (fsutil.atomic_write_folder), as the CTranslate2
export is. A model with no MarianMT equivalent (pre-norm, learned positions, spaCy word
vocabularies, a lowercasing tokenizer) is refused with every reason in one line. The source
truecaser (decode.recase) is tfm's own and is not part of the folder.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ..checkpoint import Checkpoint
from ..config import ModelConfig
from ..config_values import build_section
from ..contracts.exporter import Exporter
from ..contracts.tokenizer import Tokenizer
from ..errors import UsageError
from ..export.bundle import check_output
from ..export_manifest import ExportManifest
from ..extras import import_extra
from ..fsutil import atomic_write_folder
from ..model.transformer_config import TransformerConfig
from ..tokenizers.pair import TokenizerPair
from ..tokenizers.piece_vocab import PieceVocabTokenizer
from ..tokenizers.subword import SubwordTokenizer
from .folder import TFM_TOKENIZER
from .marian import export_refusals, feature_order, hf_config, permute_features, reorder_vocab, to_hf, vocab_order


def _tokenizer_refusals(tokenizers: TokenizerPair) -> list[str]:
    """Every reason the tokenizers have no MarianTokenizer equivalent, each on its own (a
    lowercasing word vocabulary gives two)."""
    out = []
    for side, tokenizer in (("source", tokenizers.src), ("target", tokenizers.tgt)):
        # a type, not a capability: the export copies their SentencePiece model's bytes (`_spm`)
        if not isinstance(tokenizer, (SubwordTokenizer, PieceVocabTokenizer)):
            out.append(
                f"the {side} tokenizer is a {tokenizer.kind} word vocabulary (MarianTokenizer "
                "segments with SentencePiece)"
            )
        if tokenizer.lowercase:
            out.append(f"the {side} tokenizer lowercases its input (MarianTokenizer does not)")
    return out


def _pieces(tokenizer: Tokenizer, order: list[int]) -> dict[str, int]:
    """vocab.json: each piece and its exported id."""
    tokens = tokenizer.id_to_token(order)
    if len(set(tokens)) != len(tokens):
        raise UsageError("cannot export: a vocabulary holds a piece twice")
    return {token: i for i, token in enumerate(tokens)}


def _spm(tokenizer: Tokenizer) -> bytes:
    model = getattr(tokenizer, "model", None)
    assert isinstance(model, bytes)
    return model


def export_hf(checkpoint: Checkpoint, source: Path, output: Path) -> tuple[ExportManifest, float]:
    """Write `checkpoint` (read from `source`) to the folder `output` as a MarianMT model
    (replacing an earlier export there); returns its manifest and the seconds it took."""
    safetensors = import_extra("safetensors.torch", "tfm export --format hf")
    started = time.perf_counter()
    cfg = build_section(ModelConfig, checkpoint.model_config, "model")
    tokenizers = TokenizerPair.from_state(checkpoint.tokenizer)
    refusals = HF_EXPORTER.refusals(checkpoint)
    if refusals:
        raise UsageError(f"cannot export {source} to the Hugging Face format: {'; '.join(refusals)}")
    output = Path(output)
    check_output(output)
    src, tgt = tokenizers.src, tokenizers.tgt
    src_order, tgt_order = (vocab_order(t.vocab_size, t.ids.pad) for t in (src, tgt))
    src_vocab, tgt_vocab = _pieces(src, src_order), _pieces(tgt, tgt_order)
    new_id = {tfm: i for i, tfm in enumerate(tgt_order)}
    pad, eos, start = new_id[tgt.ids.pad], new_id[tgt.ids.eos], new_id[tgt.ids.sos]
    state = reorder_vocab(to_hf(checkpoint.weights, cfg), src_order, tgt_order)
    interleaved = cfg.sinusoid_layout == "interleaved"
    if interleaved:
        state = permute_features(state, feature_order(cfg.d_model))
    written: list[ExportManifest] = []
    files = _settings_files(cfg, checkpoint, tokenizers, (pad, eos, start), src_vocab, tgt_vocab)

    def write(folder: Path) -> None:
        for name, value in files.items():
            (folder / name).write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        (folder / "source.spm").write_bytes(_spm(src))
        (folder / "target.spm").write_bytes(_spm(tgt))
        safetensors.save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
        tokenizers.save(folder, TFM_TOKENIZER)
        manifest = ExportManifest.new(
            "transformers",
            source,
            checkpoint,
            folder,
            features="interleaved" if interleaved else "halves",
            tokenizer=TFM_TOKENIZER,
            pad_moved_last={"src": src.ids.pad, "tgt": tgt.ids.pad},
        )  # vocab_order
        manifest.write(folder)
        written.append(manifest)

    atomic_write_folder(output, write)
    return written[0], round(time.perf_counter() - started, 3)


def _settings_files(
    cfg: TransformerConfig,
    checkpoint: Checkpoint,
    tokenizers: TokenizerPair,
    ids: tuple[int, int, int],
    src_vocab: dict[str, int],
    tgt_vocab: dict[str, int],
) -> dict[str, Any]:
    """The folder's JSON files by name: the model's config, its generation settings (tfm's
    decoding defaults), the tokenizer's, and the vocabularies (`ids`: pad, eos and decoder start
    in the exported order)."""
    pad, eos, start = ids
    src, tgt = tokenizers.src, tokenizers.tgt
    decode = checkpoint.config.get("decode", {})
    names = src.id_to_token([src.ids.unk, src.ids.pad, src.ids.eos])
    langs = checkpoint.config.get("data", {})
    separate = src_vocab != tgt_vocab
    files: dict[str, Any] = {
        "config.json": hf_config(cfg, src.vocab_size, tgt.vocab_size, pad, eos, start),
        "generation_config.json": {
            "decoder_start_token_id": start,
            "eos_token_id": eos,
            "forced_eos_token_id": eos,
            # tfm's cap on any output: max_len tokens with <eos>; max_length counts the start token
            "pad_token_id": pad,
            "max_length": cfg.max_len + 1,
            "num_beams": decode.get("beam_size", 1),
            "length_penalty": decode.get("length_penalty", 1.0),
            "early_stopping": True,  # tfm's beam ends once beam_size hypotheses have
        },
        "tokenizer_config.json": {
            "tokenizer_class": "MarianTokenizer",
            "unk_token": names[0],
            "pad_token": names[1],
            "eos_token": names[2],
            "model_max_length": cfg.max_len,
            "separate_vocabs": separate,
            "source_lang": langs.get("src_lang"),
            "target_lang": langs.get("tgt_lang"),
        },
        "vocab.json": src_vocab,
    }
    if separate:
        files["target_vocab.json"] = tgt_vocab
    return files


class HfExporter(Exporter):
    """`tfm export --format hf`: a MarianMT folder, run by torch (tfm reads it back as the
    model it came from)."""

    engine = "transformers"
    extra = "safetensors.torch"

    def refusals(self, checkpoint: Checkpoint) -> list[str]:
        cfg = build_section(ModelConfig, checkpoint.model_config, "model")
        tokenizers = TokenizerPair.from_state(checkpoint.tokenizer)
        return export_refusals(cfg, checkpoint.architecture) + _tokenizer_refusals(tokenizers)

    def export(self, model: Checkpoint, source: Path, output: Path, options: Any) -> tuple[ExportManifest, float]:
        return export_hf(model, source, output)

    def describe(self, manifest: ExportManifest) -> str:
        return "Hugging Face MarianMT"


HF_EXPORTER = HfExporter()
