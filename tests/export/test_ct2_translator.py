"""export/ct2_translator.py: Ct2Translator, the CTranslate2 backend: an export decodes behind
the same TranslationBackend as the checkpoint it came from (the same greedy tokens, its NLL
and attention), says what it loaded, and a CUDA library missing is one line at load time.
(Trained models, beam search and int8: test_ct2_equality.py.)"""

from __future__ import annotations

import ctranslate2
import pytest
import torch
from helpers import ct2_export, untrained_checkpoint

from transformer_cli.checkpoint import Checkpoint
from transformer_cli.config import DecodeConfig
from transformer_cli.data.shards import EncodedSplit
from transformer_cli.errors import TfmError
from transformer_cli.export.ct2_translator import Ct2Translator, open_ct2
from transformer_cli.export_manifest import MANIFEST
from transformer_cli.fsutil import file_sha256
from transformer_cli.inference.translate import TorchTranslator

LINES = ["Ein Mann sieht einen Ball.", "Zwei Hunde.", "", "Eine Frau trägt einen Hut im Park."]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ct2-translator")
    checkpoint = untrained_checkpoint(folder / "untrained.pt")
    ct2_export(checkpoint, folder / "export")
    return checkpoint, folder / "export"


def test_an_export_decodes_as_its_checkpoint_and_says_what_it_loaded(exported):
    checkpoint, folder = exported
    decode = DecodeConfig(beam_size=1, max_len_a=0.0, max_len_b=8)
    ct2 = Ct2Translator(folder, "cpu", decode, threads=1)
    torch_backend = TorchTranslator.load(Checkpoint.read(checkpoint), torch.device("cpu"), decode)
    got, expected = ct2.translate(LINES), torch_backend.translate(LINES)
    assert [[h.tokens for h in hyps] for hyps in got.translations] == [
        [h.tokens for h in hyps] for hyps in expected.translations
    ]
    assert ct2.metadata.sha256 == file_sha256(folder / MANIFEST)  # the export is what is named
    assert ct2.metadata.checkpoint_sha256 == Checkpoint.read(checkpoint).digest
    assert ct2.max_positions == 64 and Ct2Translator.engine_device(ctranslate2, "cpu") == "cpu"
    tok = torch_backend.tokenizers
    split = EncodedSplit.from_lists(tok.src.encode_batch(LINES[:2]), tok.tgt.encode_batch(["A man.", "Two dogs."]))
    assert ct2.corpus_nll(split) == pytest.approx(torch_backend.corpus_nll(split), rel=1e-4)
    best = torch_backend.translate([LINES[0]]).translations[0][0]
    src_a, tgt_a, weights_a = torch_backend.cross_attention(LINES[0], best)
    src_b, tgt_b, weights_b = ct2.cross_attention(LINES[0], best)
    assert (src_a, tgt_a) == (src_b, tgt_b)
    torch.testing.assert_close(torch.tensor(weights_b), torch.tensor(weights_a), atol=1e-5, rtol=1e-5)


def test_open_ct2_takes_api_arguments(exported):
    _, folder = exported
    backend = open_ct2(folder, "cpu", "fp32", None, 1)
    assert isinstance(backend, Ct2Translator) and backend.decode == DecodeConfig()  # the run's, stored


class _EngineWithoutCuBLAS:
    """What ctranslate2.Translator on a CUDA 13 machine did at its first translation (an H200,
    CTranslate2 4.8.5: its wheels load CUDA 12's cuBLAS); no GPU is needed to check the line."""

    def translate_batch(self, *args, **kwargs):
        raise RuntimeError("Library libcublas.so.12 is not found or cannot be loaded")


def test_a_cuda_library_missing_is_one_line_at_load_time(tmp_path):
    ct2_export(untrained_checkpoint(tmp_path / "untrained.pt"), tmp_path / "export")
    translator = Ct2Translator(tmp_path / "export", device="cpu")
    translator._check_cuda_libraries(ctranslate2.__version__)  # the real engine translates the token
    translator.engine = _EngineWithoutCuBLAS()
    with pytest.raises(TfmError) as refused:
        translator._check_cuda_libraries(ctranslate2.__version__)
    message = str(refused.value)
    assert "\n" not in message and "libcublas.so.12" in message and "--device cpu" in message
