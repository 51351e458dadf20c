"""Run under torchrun: trains a config with DDP and writes this rank's weight digest, and the
validation BLEU decoded by all ranks and by this rank alone, to OUT/rank<N>.json."""

import json
import sys
from pathlib import Path

import torch

from transformer_cli.checkpoint import content_digest
from transformer_cli.config_loading import load_config
from transformer_cli.data.prepared import load_prepared
from transformer_cli.training.build import build_trainer
from transformer_cli.training.distributed import DistContext, init_distributed, shutdown_distributed
from transformer_cli.training.run_dir import RunDir
from transformer_cli.training.signals import GracefulStop
from transformer_cli.training.validation import validation_bleu

cfg, out = load_config(sys.argv[1]), Path(sys.argv[2])
ctx, device = init_distributed(torch.device("cpu"))
trainer = build_trainer(cfg, load_prepared(cfg), RunDir(out / "run"), device, ctx, GracefulStop(), False)
if ctx.is_main:
    (out / "run").mkdir(parents=True, exist_ok=True)
ctx.barrier()
trainer.run()
digest = content_digest({"weights": trainer.model.state_dict()})
bleu = {
    name: validation_bleu(trainer.model, trainer.prepared, cfg, device, None, trainer.cadence, dist)["valid_bleu"]
    for name, dist in (("sharded", ctx), ("alone", DistContext()))
}
(out / f"rank{ctx.rank}.json").write_text(
    json.dumps(
        {
            "digest": digest,
            "steps": trainer.progress.step,
            "world_size": ctx.world_size,
            "agreements": trainer.cadence.agreement.count,
            "valid_loss": [r.valid_loss for r in trainer.progress.history],
            "bleu": bleu,
        }
    )
)
shutdown_distributed()
