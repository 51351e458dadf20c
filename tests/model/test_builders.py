"""model/builders.py: models are rebuilt from the architecture name their checkpoint records."""

import dataclasses

import pytest
import torch

from helpers import untrained_checkpoint
from transformer_cli.checkpoint import Checkpoint, CheckpointError
from transformer_cli.config import ModelConfig
from transformer_cli.data.vocab import TFM_IDS
from transformer_cli.errors import UsageError
from transformer_cli.inference.translate import model_from_checkpoint
from transformer_cli.model.builders import ARCHITECTURES, build_model
from transformer_cli.model.transformer import Seq2SeqTransformer


def test_a_model_is_rebuilt_by_its_name():
    torch.manual_seed(0)
    model = build_model("transformer", ModelConfig(d_model=16, n_heads=2, d_ff=32), 30, 40, TFM_IDS, TFM_IDS)
    assert isinstance(model, Seq2SeqTransformer) and model.ARCHITECTURE in ARCHITECTURES
    again = build_model(model.ARCHITECTURE, model.config, model.src_vocab_size, model.tgt_vocab_size,
                        model.src_ids, model.tgt_ids)
    again.load_state_dict(model.state_dict())
    src, tgt = torch.randint(4, 30, (2, 5)), torch.randint(4, 40, (2, 4))
    assert torch.equal(model.eval()(src, tgt), again.eval()(src, tgt))


def test_unknown_names_are_refused_in_one_line(tmp_path):
    with pytest.raises(UsageError, match=r"unknown model architecture 'mamba' \(this tfm builds: transformer\)"):
        build_model("mamba", ModelConfig(), 30, 40, TFM_IDS, TFM_IDS)
    checkpoint = dataclasses.replace(Checkpoint.read(untrained_checkpoint(tmp_path / "m.pt")), architecture="mamba")
    with pytest.raises(CheckpointError, match=r"m\.pt: checkpoint does not fit this version of tfm: "
                                              r"unknown model architecture 'mamba'"):
        model_from_checkpoint(checkpoint, tmp_path / "m.pt")
