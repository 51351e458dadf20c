"""Text in, text out: a checkpoint's model and tokenizers behind one `Translator`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..checkpoint import CheckpointError, load_checkpoint
from ..config import DecodeConfig, ModelConfig, build_section
from ..data.batching import pad_batch
from ..data.tokenizers import TokenizerPair
from ..data.vocab import EOS, SOS
from ..device import autocast
from ..errors import UsageError
from ..model.builders import architecture_of, build_model
from ..model.transformer import Seq2SeqTransformer
from .search import Hypothesis, beam_search, greedy_search, output_limits


def model_from_payload(payload: dict[str, Any], path: Path | None = None
                       ) -> tuple[Seq2SeqTransformer, TokenizerPair]:
    """Rebuild the model and tokenizers stored in a checkpoint payload (`path`, the file it was
    read from, is named in errors)."""
    try:
        arch = payload["model"]
        cfg = build_section(ModelConfig, arch["config"], "model")
        model = build_model(architecture_of(arch), cfg, arch["src_vocab_size"], arch["tgt_vocab_size"])
        model.load_state_dict(payload["state_dict"])
        tokenizers = TokenizerPair.from_state(payload["tokenizer"])
    except (KeyError, TypeError, ValueError, RuntimeError, UsageError) as e:
        where = f"{path}: " if path is not None else ""
        reason = f"missing {e}" if isinstance(e, KeyError) else str(e)
        raise CheckpointError(f"{where}checkpoint does not fit this version of tfm: {reason}") from None
    return model, tokenizers


@contextlib.contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[None]:
    """Dropout off while decoding; every submodule's train/eval mode is restored afterwards,
    so decoding a model that is being trained does not change how it trains."""
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for m, training in modes:
            m.training = training


@dataclass
class Translation:
    text: str
    tokens: list[int]
    score: float


class TextTranslator:
    """Lines of text in, n-best translations out, around a search that subclasses provide
    (`_search`): tokenization, truncation of long inputs, length-sorted batches, detokenization."""

    def __init__(self, tokenizers: TokenizerPair, decode: DecodeConfig, max_len: int):
        self.tokenizers = tokenizers
        self.decode = decode
        self.max_src_len = max_len - 1  # room for <eos>
        self.truncated: list[tuple[int, int]] = []  # (line index in the last call, original length)
        self.payload: dict[str, Any] = {}  # checkpoint metadata (config, metrics) when loaded from one

    def encode_sources(self, lines: list[str], recase: bool | None = None) -> list[torch.Tensor]:
        """Token ids + <eos> per line, truncated to the model's positions (noted in .truncated).
        Lines without casing are recased first unless `recase` (default: decode.recase) is off."""
        recase = self.decode.recase if recase is None else recase
        out = []
        for i, ids in enumerate(self.tokenizers.encode_sources(lines, recase)):
            if len(ids) > self.max_src_len:
                self.truncated.append((i, len(ids)))
                ids = ids[: self.max_src_len]
            out.append(torch.tensor([*ids, EOS]))
        return out

    def translate(self, lines: list[str], decode: DecodeConfig | None = None,
                  check_stop: Callable[[], None] | None = None) -> list[list[Translation]]:
        """n-best translations for each line (empty lines give one empty translation), with
        `decode` (default: self.decode) for this call only. `check_stop` is called before each
        batch (it may raise to abandon the call)."""
        d = decode or self.decode
        self.truncated = []
        results: list[list[Translation]] = [[Translation("", [], 0.0)] for _ in lines]
        todo = [i for i, line in enumerate(lines) if line.strip()]
        sources = self.encode_sources([lines[i] for i in todo], d.recase)
        order = sorted(range(len(todo)), key=lambda j: len(sources[j]))  # similar lengths together
        for start in range(0, len(order), d.batch_size):
            if check_stop is not None:
                check_stop()
            chunk = order[start : start + d.batch_size]
            for j, hyps in zip(chunk, self._search([sources[j] for j in chunk], d)):
                results[todo[j]] = [Translation(self.tokenizers.tgt.decode(h.tokens), h.tokens, h.score)
                                    for h in hyps]
        self.truncated = [(todo[j], n) for j, n in self.truncated]
        return results

    def _search(self, sources: list[torch.Tensor], d: DecodeConfig) -> list[list[Hypothesis]]:
        """The n-best hypotheses, best first, of each source (ids ending in <eos>)."""
        raise NotImplementedError


class Translator(TextTranslator):
    """Translates lines of text with a trained model on torch; long inputs are truncated."""

    def __init__(self, model: Seq2SeqTransformer, tokenizers: TokenizerPair, device: torch.device,
                 decode: DecodeConfig, dtype: torch.dtype | None = None):
        super().__init__(tokenizers, decode, model.config.max_len)
        self.model = model.to(device)
        self.device = device
        self.dtype = dtype

    @classmethod
    def from_checkpoint(cls, path: Path, device: torch.device, decode: DecodeConfig | None = None,
                        dtype: torch.dtype | None = None) -> Translator:
        payload = load_checkpoint(path)
        model, tokenizers = model_from_payload(payload, path)
        if decode is None:
            try:
                decode = build_section(DecodeConfig, payload.get("config", {}).get("decode", {}),
                                       "decode")
            except (AttributeError, UsageError) as e:
                raise CheckpointError(f"{path}: its decode settings do not fit this version of "
                                      f"tfm: {e}") from None
        translator = cls(model.eval(), tokenizers, device, decode, dtype)
        translator.payload = {k: v for k, v in payload.items() if k not in ("state_dict", "train_state")}
        return translator

    def _search(self, sources: list[torch.Tensor], d: DecodeConfig) -> list[list[Hypothesis]]:
        src = pad_batch(sources).to(self.device)
        lengths = torch.tensor([len(s) for s in sources])
        limits = output_limits(lengths, d.max_len_a, d.max_len_b, cap=self.model.config.max_len)
        with autocast(self.device, self.dtype), eval_mode(self.model):
            if d.beam_size == 1:
                return [[h] for h in greedy_search(self.model, src, limits)]
            return beam_search(self.model, src, limits, d.beam_size, d.length_penalty, d.n_best)

    def cross_attention(self, line: str, translation: Translation, recase: bool | None = None
                        ) -> tuple[list[str], list[str], torch.Tensor]:
        """Source tokens, target tokens and the last decoder layer's attention averaged over
        heads, [tgt_len, src_len], for one sentence and its translation (`recase`: see
        encode_sources)."""
        src = self.encode_sources([line], recase)[0]
        tgt_in = torch.tensor([[SOS, *translation.tokens]])
        with torch.inference_mode(), eval_mode(self.model):
            weights = self.model.cross_attention(src[None].to(self.device), tgt_in.to(self.device))
        src_tokens = self.tokenizers.src.id_to_token(src.tolist())
        tgt_tokens = self.tokenizers.tgt.id_to_token([*translation.tokens, EOS])
        return src_tokens, tgt_tokens, weights[0].mean(0).float().cpu()
