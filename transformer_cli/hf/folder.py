"""A MarianMT folder (transformers' format) read as a tfm model, and Hub ids fetched to one.

    config.json                          the architecture (marian.model_settings)
    model.safetensors (+ .index.json shards) or pytorch_model.bin     the weights
    source.spm, target.spm               SentencePiece models (segmentation)
    vocab.json (+ target_vocab.json)     piece -> id (separate target ids when
                                         tokenizer_config.json says separate_vocabs)
    tokenizer_config.json                the special tokens' names (optional)
    generation_config.json               num_beams, length_penalty: decoding defaults (optional)
    tfm-export.json, tfm-tokenizer.json  only in folders `tfm export --format hf` wrote: the
                                         sha256 of every file, how ids and features were
                                         reordered, tfm's tokenizers: read back, the model is
                                         exactly the one exported

Everything tfm cannot express is refused at once, in one line (a UsageError, exit 2). The
result is a `Checkpoint` like any other (architecture "transformer"; sha256: its content
digest), so translation, evaluation, serving, export and `train.init_from` take it as they
take a trained tfm model.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import torch

from ..checkpoint import FORMAT, Checkpoint, content_digest
from ..config import Config, DecodeConfig, ModelConfig
from ..config_values import build_section
from ..errors import TfmError, UsageError, first_line
from ..export_manifest import MANIFEST, ExportManifest
from ..extras import import_extra
from ..tokenizers.pair import TokenizerPair
from ..tokenizers.piece_vocab import MARIAN_SPECIALS, PieceVocabTokenizer
from .marian import feature_order, model_settings, permute_features, reorder_vocab, to_tfm, vocab_order

TFM_TOKENIZER = "tfm-tokenizer.json"  # tfm's tokenizers, in a folder tfm exported
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
# Endings of model and config files, which no Hub id has: OWNER/NAME with one is a path.
FILE_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt", ".safetensors", ".yaml", ".yml", ".json")
HUB_FILES = [
    "config.json",
    "generation_config.json",
    "tokenizer_config.json",
    "*.spm",
    "vocab.json",
    "target_vocab.json",
    "model.safetensors",
    "model.safetensors.index.json",
    "model-*.safetensors",
    "pytorch_model.bin",
]


def is_hf_folder(path: Path) -> bool:
    """Whether `path` is a folder of a transformers model (by its config.json)."""
    return (Path(path) / "config.json").is_file()


def is_hub_id(spec: str) -> bool:
    """Whether `spec` names a model on the Hugging Face Hub rather than a path here: OWNER/NAME
    (one slash, the Hub's characters) that is not a path that exists, does not end like a model
    or config file (`FILE_SUFFIXES`: no Hub id does), and whose OWNER is not a folder here.
    "bad/nope.pt" and "checkpoints/nope" (with checkpoints/ here) are paths, missing ones."""
    path = Path(spec)
    return (
        HUB_ID.match(spec) is not None
        and not path.exists()
        and not spec.lower().endswith(FILE_SUFFIXES)
        and not path.parent.is_dir()
    )


def locate(spec: str) -> Path | None:
    """The local folder of `spec` when it names a model on the Hugging Face Hub
    ("Helsinki-NLP/opus-mt-de-en") rather than a path (`is_hub_id`): fetched once into the
    Hub's cache (huggingface_hub, the hf extra). None when `spec` is a path."""
    if not is_hub_id(spec):
        return None
    hub = import_extra("huggingface_hub", f"{spec} is no file or folder here; fetching it from the Hugging Face Hub")
    try:
        return Path(hub.snapshot_download(spec, allow_patterns=HUB_FILES))
    except Exception as e:  # no network, no such repository, a gated one: one line, whatever it is
        raise TfmError(
            f"cannot fetch {spec} from the Hugging Face Hub ({type(e).__name__}: "
            f"{first_line(e)}); without a network, give a local folder"
        ) from None


def read_folder(folder: Path) -> Checkpoint:
    """The MarianMT model in `folder` as a tfm Checkpoint. A folder tfm exported is verified
    against its tfm-export.json and read back as the model it was made from."""
    folder = Path(folder)
    manifest = ExportManifest.read(folder) if (folder / MANIFEST).is_file() else None
    config = _json(folder / "config.json")
    options = _json(folder / "tokenizer_config.json") if (folder / "tokenizer_config.json").is_file() else {}
    settings, refusals = model_settings(config)
    tokenizers, vocab_refusals = _tokenizers(folder, config, options)
    refusals += vocab_refusals
    if refusals:
        raise UsageError(f"{folder}: tfm cannot express this model: {'; '.join(refusals)}")
    state = _weights(folder)
    run = Config(name=folder.name).to_dict()
    own = manifest.details if manifest is not None else {}  # hf/export.py's fields
    if manifest is not None and isinstance(own.get("tokenizer"), str):  # exported by tfm: its tokenizers, ...
        tokenizers = _tfm_tokenizers(folder, own["tokenizer"])
        moved = own["pad_moved_last"] if isinstance(own.get("pad_moved_last"), dict) else {}
        orders = [
            vocab_order(t.vocab_size, int(moved.get(side, t.vocab_size - 1)))
            for side, t in (("src", tokenizers.src), ("tgt", tokenizers.tgt))
        ]
        state = reorder_vocab(state, *(torch.tensor(order).argsort().tolist() for order in orders))
        run = manifest.config
        settings = run["model"]
    else:
        run["decode"] = _decoding(folder)
        # The languages, when the tokenizer says (None: unknown, and the server checks none).
        run["data"]["src_lang"], run["data"]["tgt_lang"] = options.get("source_lang"), options.get("target_lang")
        bias = state.get("final_logits_bias")
        settings["output_bias"] = bias is not None and bool(bias.any())  # a zero bias is none
    try:
        cfg = build_section(ModelConfig, settings, "model")
        if own.get("features") == "interleaved":  # from interleaved sinusoids
            state = permute_features(state, feature_order(cfg.d_model).argsort())
        weights = to_tfm(state, cfg)
    except (UsageError, KeyError) as e:
        raise UsageError(f"{folder}: not a complete MarianMT model: missing or unusable {first_line(e)}") from None
    _check_sizes(folder, weights, tokenizers)
    run["model"] = dataclasses.asdict(cfg)
    checkpoint = Checkpoint(
        "transformer",
        tokenizers.src.vocab_size,
        tokenizers.tgt.vocab_size,
        weights,
        tokenizers.state(),
        run,
        metrics=dict(manifest.metrics if manifest else {}),
    )
    checkpoint.sha256 = content_digest({**checkpoint.to_payload(), "format": FORMAT})
    return checkpoint


def _tfm_tokenizers(folder: Path, name: str) -> TokenizerPair:
    try:
        return TokenizerPair.load(folder, name)
    except (OSError, ValueError, KeyError) as e:
        raise TfmError(f"export {folder}: cannot load its tfm tokenizer: {first_line(e)}") from None


def _json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise UsageError(f"cannot read {path}: {first_line(e)}") from None
    if not isinstance(value, dict):
        raise UsageError(f"{path} is not a JSON object")
    return value


def _special(value: Any, default: str) -> str:
    """A special token's name in tokenizer_config.json: a string or {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else default


def _tokenizers(folder: Path, config: dict[str, Any], options: dict[str, Any]) -> tuple[TokenizerPair, list[str]]:
    """Source and target tokenizers, and every reason they do not fit config.json."""
    names = {role: _special(options.get(f"{role}_token"), MARIAN_SPECIALS[role]) for role in ("unk", "pad", "eos")}
    separate = bool(options.get("separate_vocabs", False))
    vocabs = {
        "src": _vocabulary(folder / "vocab.json"),
        "tgt": _vocabulary(folder / ("target_vocab.json" if separate else "vocab.json")),
    }
    refusals = []
    start = config.get("decoder_start_token_id", config.get("pad_token_id"))
    itos = vocabs["tgt"]
    if not isinstance(start, int) or not 0 <= start < len(itos):
        refusals.append(f"decoder_start_token_id {start!r} is not an id of the target vocabulary")
        start = itos.index(names["pad"]) if names["pad"] in itos else 0
    specials = {**names, "sos": itos[start]}  # the decoder's start (Marian's: <pad>)
    for role, key in (("pad", "pad_token_id"), ("eos", "eos_token_id")):
        token = names[role]
        if token not in itos or itos.index(token) != config.get(key):
            refusals.append(f"config.json's {key} {config.get(key)!r} is not the vocabulary's {token!r}")
    try:  # (a separate source vocabulary has no use for a start token: its <pad> stands in)
        src = PieceVocabTokenizer(
            _bytes(folder / "source.spm"), vocabs["src"], {**specials, "sos": names["pad"]} if separate else specials
        )
        tgt = PieceVocabTokenizer(_bytes(folder / "target.spm"), itos, specials)
    except (ValueError, RuntimeError) as e:
        raise UsageError(f"{folder}: its tokenizer cannot be used: {first_line(e)}") from None
    joint = not separate and src.model == tgt.model
    return TokenizerPair(src, src if joint else tgt, joint=joint), refusals


def _vocabulary(path: Path) -> list[str]:
    """vocab.json (piece -> id) as the pieces by id; ids must run from 0 without gaps."""
    mapping = _json(path)
    ids = sorted(mapping.values()) if all(isinstance(v, int) for v in mapping.values()) else None
    if ids != list(range(len(mapping))):
        raise UsageError(f"{path}: the ids must be the integers 0..{len(mapping) - 1}, each once")
    itos = [""] * len(mapping)
    for piece, i in mapping.items():
        itos[i] = piece
    return itos


def _bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    """The state dict, from safetensors (one file or shards) or pytorch_model.bin."""
    files = [folder / "model.safetensors"]
    if (folder / "model.safetensors.index.json").is_file():
        files = sorted({folder / f for f in _json(folder / "model.safetensors.index.json")["weight_map"].values()})
    if all(f.is_file() for f in files):
        safetensors = import_extra("safetensors.torch", f"reading {files[0]}")
        state: dict[str, torch.Tensor] = {}
        for f in files:
            try:
                state.update(safetensors.load_file(str(f)))
            except Exception as e:  # a truncated or foreign file
                raise TfmError(f"{f} is damaged or not safetensors: {first_line(e)}") from None
        return {k: v.float() for k, v in state.items()}
    binary = folder / "pytorch_model.bin"
    if not binary.is_file():
        raise UsageError(f"{folder} holds no weights (model.safetensors or pytorch_model.bin)")
    try:
        state = torch.load(binary, map_location="cpu", weights_only=True)
    except Exception as e:  # refuses pickled code, like every checkpoint tfm reads
        raise UsageError(f"refusing to load {binary}: {first_line(e)}") from None
    return {k: v.float() for k, v in state.items()}


def _check_sizes(folder: Path, weights: dict[str, torch.Tensor], tokenizers: TokenizerPair) -> None:
    for side, name in (("src", "encoder.embed.embedding.weight"), ("tgt", "generator.weight")):
        rows, size = weights[name].size(0), getattr(tokenizers, side).vocab_size
        if rows != size:
            raise UsageError(
                f"{folder}: the {'source' if side == 'src' else 'target'} vocabulary "
                f"holds {size} pieces, the model's matrix {rows} rows"
            )


def _decoding(folder: Path) -> dict[str, Any]:
    """Decoding defaults: generation_config.json's num_beams and length_penalty, else tfm's."""
    path = folder / "generation_config.json"
    generation = _json(path) if path.is_file() else {}
    values = {"beam_size": generation.get("num_beams"), "length_penalty": generation.get("length_penalty")}
    decode = build_section(DecodeConfig, {k: v for k, v in values.items() if v is not None}, "decode")
    return dataclasses.asdict(decode)
