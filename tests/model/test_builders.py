"""Models are rebuilt from the architecture name their checkpoint records."""

import pytest
import torch

from helpers import untrained_checkpoint
from transformer_cli.checkpoint import CheckpointError, load_checkpoint
from transformer_cli.config import ModelConfig
from transformer_cli.inference.translate import model_from_payload
from transformer_cli.model.builders import ARCHITECTURES, architecture_of, build_model
from transformer_cli.model.transformer import Seq2SeqTransformer


def test_a_described_model_is_rebuilt_by_its_name():
    torch.manual_seed(0)
    model = build_model("transformer", ModelConfig(d_model=16, n_heads=2, d_ff=32), 30, 40)
    described = model.describe()
    assert isinstance(model, Seq2SeqTransformer) and described["architecture"] in ARCHITECTURES
    again = build_model(architecture_of(described), ModelConfig(**described["config"]),
                        described["src_vocab_size"], described["tgt_vocab_size"])
    again.load_state_dict(model.state_dict())
    src, tgt = torch.randint(4, 30, (2, 5)), torch.randint(4, 40, (2, 4))
    assert torch.equal(model.eval()(src, tgt), again.eval()(src, tgt))


def test_older_checkpoints_hold_a_transformer_and_unknown_names_are_refused(tmp_path):
    payload = load_checkpoint(untrained_checkpoint(tmp_path / "m.pt"))
    del payload["model"]["architecture"]  # as written before the name was recorded
    assert isinstance(model_from_payload(payload)[0], Seq2SeqTransformer)
    payload["model"]["architecture"] = "mamba"
    with pytest.raises(CheckpointError, match=r"m\.pt: checkpoint does not fit this version of tfm: "
                                              r"unknown model architecture 'mamba' \(this tfm builds: transformer\)"):
        model_from_payload(payload, tmp_path / "m.pt")
