"""Decoding with a CTranslate2 export behind tfm's translator interface.

`Ct2Translator` is a `TranslationBackend`: tfm's own tokenization, truncation, batching and
detokenization around `ctranslate2.Translator`, so its text is identical in form to the torch
`TorchTranslator`'s. Ids cross the boundary as the vocabulary's token strings (the export's
vocabulary is tfm's, id for id), and CTranslate2 appends the source's `<eos>` itself.

Output lengths follow tfm's rule (at most a·src_len + b tokens including `<eos>`, capped at the
model's positions), but CTranslate2 takes one limit per batch: a batch decodes up to its
longest sentence's limit and any output longer than its own sentence's limit is cut there.
For greedy search that is exactly tfm's result (greedy tokens do not depend on the limit);
for beam search it can differ on outputs that run into their limit, and so can the score of
a cut output. Scores are tfm's: log-probability / (tokens + <eos>)^length_penalty.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch

from ..checkpoint import CheckpointError
from ..config import DecodeConfig
from ..config_sections import saved_decode
from ..contracts.engine import Engine
from ..contracts.strategy import Hypothesis
from ..data.shards import TokenPairs
from ..errors import TfmError, UsageError, first_line
from ..export_manifest import MANIFEST
from ..fsutil import file_sha256
from ..host.threads import AUTO, Setting, start_count
from ..inference.outputs import Translation
from ..inference.search import output_limits
from ..inference.strategies import strategy_for
from ..inference.translate import ModelMetadata, TranslationBackend
from .bundle import read_export
from .engine import import_ctranslate2

DEVICES = ("auto", "cpu", "cuda")  # CTranslate2's


def open_ct2(path: Path, device: str, precision: str, decode: DecodeConfig | None, threads: Setting) -> Ct2Translator:
    """seams.ENGINES' ctranslate2 (api.open_backend's arguments; the precision is the export's):
    `threads` CTranslate2's intra-op threads (auto: the CPUs; None: torch's current number)."""
    count = (
        threads if isinstance(threads, int) else start_count(threads) if threads == AUTO else torch.get_num_threads()
    )
    return Ct2Translator(path, device, decode, count)


class Ct2Translator(TranslationBackend):
    """Translates lines of text with a CTranslate2 export of a tfm model (see `export.bundle`)."""

    def __init__(self, folder: Path, device: str = "auto", decode: DecodeConfig | None = None, threads: int = 0):
        """`threads`: CTranslate2's intra-op threads (0: its default)."""
        ct2 = import_ctranslate2(f"the CTranslate2 export {folder}")
        if device not in DEVICES:
            raise UsageError(f"a CTranslate2 export runs on auto, cpu or cuda (got {device!r})")
        if device == "cuda" and ct2.get_cuda_device_count() == 0:
            raise UsageError("--device cuda: no CUDA GPU is visible to CTranslate2")
        manifest, tokenizers = read_export(folder)
        try:
            self.max_positions = int(manifest.model.config["max_len"])
            if decode is None:
                decode = saved_decode(manifest.config.get("decode", {}))
        except (KeyError, TypeError, ValueError, AttributeError, UsageError) as e:
            raise CheckpointError(f"export {folder}: its manifest does not fit this tfm: {e}") from None
        # sha256 names what is loaded (the export: its manifest holds every file's sha256),
        # checkpoint_sha256 the checkpoint it was exported from.
        metadata = ModelMetadata(
            file_sha256(Path(folder) / MANIFEST),
            manifest.model,
            manifest.config,
            manifest.metrics,
            manifest.checkpoint_sha256,
        )
        super().__init__(tokenizers, decode, self.max_positions, metadata)
        self.src_tokens = tokenizers.src.id_to_token(range(tokenizers.src.vocab_size))
        self.tgt_tokens = tokenizers.tgt.id_to_token(range(tokenizers.tgt.vocab_size))
        self.tgt_token_ids = {token: i for i, token in enumerate(self.tgt_tokens)}
        try:
            self.engine = ct2.Translator(str(folder), device=device, intra_threads=threads)
        except (RuntimeError, ValueError) as e:
            first = first_line(e)
            raise CheckpointError(f"CTranslate2 cannot load the export {folder}: {first}") from None
        if self.engine_device(ct2, device) == "cuda":
            self._check_cuda_libraries(ct2.__version__)

    def _check_cuda_libraries(self, version: str) -> None:
        """Translate one token now: CTranslate2 opens cuBLAS at its first matrix product, and a
        wheel built for another CUDA than the machine's (CTranslate2 4.x wants CUDA 12's
        libcublas.so.12; seen missing on a CUDA 13 machine) fails there. Failing at load time
        gives one line before a server starts, not an error at its first request."""
        try:
            self.engine.translate_batch(
                [[self.src_tokens[self.tokenizers.src.ids.unk]]], beam_size=1, max_decoding_length=1
            )
        except RuntimeError as e:
            raise TfmError(
                f"CTranslate2 {version} cannot decode on cuda here: {first_line(e)} (the "
                f"CUDA libraries it was built for; torch here has CUDA {torch.version.cuda}): "
                "install them, or use --device cpu"
            ) from None

    @staticmethod
    def engine_device(ct2: ModuleType, device: str) -> str:
        """Where CTranslate2 runs a model asked for on `device` ("auto": a GPU if it sees one)."""
        return "cuda" if device == "cuda" or (device == "auto" and ct2.get_cuda_device_count()) else "cpu"

    def _source_tokens(self, ids: torch.Tensor) -> list[str]:
        """Source ids ending in <eos> -> tokens without it (CTranslate2 appends <eos>)."""
        return [self.src_tokens[i] for i in ids[:-1].tolist()]

    def _search(self, sources: list[torch.Tensor], d: DecodeConfig) -> list[list[Hypothesis]]:
        limits = output_limits(
            torch.tensor([len(s) for s in sources]), d.max_len_a, d.max_len_b, cap=self.max_positions
        ).tolist()
        options = strategy_for(d).ct2_options(d)
        penalty = options["length_penalty"]
        ids = self.tokenizers.tgt.ids
        if ids.sos == ids.pad:  # as tfm's search (inference/search.py): never the start token
            options["suppress_sequences"] = [[self.tgt_tokens[ids.sos]]]
        results = self.engine.translate_batch(
            [self._source_tokens(s) for s in sources],
            **options,
            max_decoding_length=max(1, max(limits) - 1),
            min_decoding_length=0,
            max_input_length=0,
            return_scores=True,
            return_end_token=True,
        )
        return [
            [self._hypothesis(tokens, score, limit, penalty) for tokens, score in zip(r.hypotheses, r.scores)]
            for r, limit in zip(results, limits)
        ]

    def _hypothesis(self, tokens: list[str], score: float, limit: int, penalty: float) -> Hypothesis:
        """tfm's Hypothesis from CTranslate2's (tokens with their <eos>, normalised score)."""
        ids = [self.tgt_token_ids[t] for t in tokens]
        log_prob = score * len(ids) ** penalty  # CTranslate2 normalised by this length
        if ids and ids[-1] == self.tokenizers.tgt.ids.eos:
            ids.pop()
        ids = ids[: limit - 1]
        return Hypothesis(ids, log_prob, log_prob / (len(ids) + 1) ** penalty)

    def cross_attention(
        self, line: str, translation: Translation, recase: bool | None = None
    ) -> tuple[list[str], list[str], list[list[float]]]:
        """The translation is forced as the target prefix."""
        [src], _ = self.encode_sources([line], recase)
        prefix = [self.tgt_tokens[i] for i in translation.tokens]
        result = self.engine.translate_batch(
            [self._source_tokens(src)],
            target_prefix=[prefix],
            beam_size=1,
            max_decoding_length=len(prefix) + 1,
            max_input_length=0,
            return_attention=True,
            return_end_token=True,
        )[0]
        weights = torch.tensor(result.attention[0])[: len(prefix) + 1]
        # CTranslate2 leaves out the column of the <eos> it appended; each row sums to 1.
        weights = torch.cat([weights, 1.0 - weights.sum(-1, keepdim=True)], dim=-1)
        src_tokens = self.tokenizers.src.id_to_token(src.tolist())
        tgt_tokens = self.tokenizers.tgt.id_to_token([*translation.tokens, self.tokenizers.tgt.ids.eos])
        return src_tokens, tgt_tokens, weights.tolist()

    def corpus_nll(self, split: TokenPairs, check_stop: Callable[[], None] | None = None) -> tuple[float, int]:
        """By CTranslate2's `score_batch`, in one call (`check_stop` is called before it)."""
        if check_stop is not None:
            check_stop()
        limit = self.max_positions - 1
        sources, targets = [], []
        for i in range(len(split)):
            src, tgt = split.pair(i)
            sources.append([self.src_tokens[j] for j in src[:limit].tolist()])
            targets.append([self.tgt_tokens[j] for j in tgt[:limit].tolist()])
        results = self.engine.score_batch(sources, targets, max_batch_size=self.decode.batch_size, max_input_length=0)
        nll = -sum(sum(r.log_probs) for r in results)
        return nll, sum(len(r.log_probs) for r in results)


CT2 = Engine(open_ct2)  # seams.ENGINES' ctranslate2: its exports hold converted weights, not read back
