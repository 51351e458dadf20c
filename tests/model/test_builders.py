"""model/builders.py: models are rebuilt from the architecture name their checkpoint records."""

import dataclasses

import pytest
import torch
from helpers import untrained_checkpoint

from transformer_cli.checkpoint import Checkpoint, CheckpointError
from transformer_cli.errors import UsageError
from transformer_cli.inference.translate import model_from_checkpoint
from transformer_cli.model.builders import build_model
from transformer_cli.model.transformer import Seq2SeqTransformer
from transformer_cli.model.transformer_config import TransformerConfig
from transformer_cli.seams import ARCHITECTURES
from transformer_cli.tokenizers.vocab import TFM_IDS


def test_a_model_is_rebuilt_by_its_name():
    torch.manual_seed(0)
    model = build_model("transformer", TransformerConfig(d_model=16, n_heads=2, d_ff=32), 30, 40, TFM_IDS, TFM_IDS)
    assert isinstance(model, Seq2SeqTransformer) and model.ARCHITECTURE in ARCHITECTURES
    again = build_model(
        model.ARCHITECTURE, model.config, model.src_vocab_size, model.tgt_vocab_size, model.src_ids, model.tgt_ids
    )
    again.load_state_dict(model.state_dict())
    src, tgt = torch.randint(4, 30, (2, 5)), torch.randint(4, 40, (2, 4))
    assert torch.equal(model.eval()(src, tgt), again.eval()(src, tgt))


def test_unknown_names_are_refused_in_one_line(tmp_path):
    with pytest.raises(UsageError, match=r"unknown model architecture 'mamba' \(known: transformer\)"):
        build_model("mamba", TransformerConfig(), 30, 40, TFM_IDS, TFM_IDS)
    checkpoint = dataclasses.replace(Checkpoint.read(untrained_checkpoint(tmp_path / "m.pt")), architecture="mamba")
    with pytest.raises(
        CheckpointError,
        match=r"m\.pt: checkpoint does not fit this version of tfm: "
        r"model.architecture: unknown model architecture 'mamba'",
    ):
        model_from_checkpoint(checkpoint, tmp_path / "m.pt")


@dataclasses.dataclass
class WideOutputConfig(TransformerConfig):
    """A family from outside the package: its own key beside the Transformer's (it extends
    the Transformer's settings; tests/test_plugins.py has a family with none of them)."""

    output_scale: float = 1.0


class WideOutput(Seq2SeqTransformer):
    """The Transformer with its logits multiplied by `output_scale`."""

    ARCHITECTURE = "wide-output"

    def forward(self, src, tgt_in):
        return super().forward(src, tgt_in) * self.config.output_scale


def test_an_architecture_registered_from_outside_has_its_own_settings_and_round_trips(tmp_path):
    from helpers import write_config

    from transformer_cli.config_loading import load_config
    from transformer_cli.model.builders import register_architecture

    register_architecture(WideOutput.ARCHITECTURE, WideOutput, WideOutputConfig)
    try:
        path = write_config(
            tmp_path / "w.yaml", tmp_path, tmp_path, model={"architecture": "wide-output", "output_scale": 2.0}
        )
        cfg = load_config(str(path))
        assert isinstance(cfg.model, WideOutputConfig) and cfg.model.output_scale == 2.0
        model = build_model(cfg.model.architecture, cfg.model, 30, 30, TFM_IDS, TFM_IDS)
        assert isinstance(model, WideOutput)
        checkpoint = dataclasses.replace(
            Checkpoint.read(untrained_checkpoint(tmp_path / "m.pt")),
            architecture="wide-output",
            weights=model.state_dict(),
            config=cfg.to_dict(),
            src_vocab_size=30,
            tgt_vocab_size=30,
        )
        again, _ = model_from_checkpoint(checkpoint)
        assert isinstance(again, WideOutput) and again.config.output_scale == 2.0
        src, tgt = torch.randint(4, 30, (2, 5)), torch.randint(4, 30, (2, 4))
        assert torch.equal(model.eval()(src, tgt), again.eval()(src, tgt))
        with pytest.raises(UsageError, match=r"unknown key 'model.output_scale'"):
            write_config(tmp_path / "t.yaml", tmp_path, tmp_path, model={"output_scale": 2.0})
            load_config(str(tmp_path / "t.yaml"))  # the Transformer has no such key
    finally:
        ARCHITECTURES.unregister("wide-output")
