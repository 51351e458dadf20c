"""Takes the first STEPS optimizer steps of a config's first epoch and saves the weights to OUT.

Run alone (one process) or under torchrun (rank 0 saves): python step_worker.py CFG STEPS OUT [KEY=VALUE ...]
"""

import itertools
import sys

import torch

from transformer_cli.config_loading import load_config
from transformer_cli.data.prepared import load_prepared
from transformer_cli.training.build import build_trainer
from transformer_cli.training.distributed import init_distributed, shutdown_distributed
from transformer_cli.training.run_dir import RunDir
from transformer_cli.training.signals import GracefulStop

config, steps, out, overrides = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
cfg = load_config(config, overrides)
ctx, device = init_distributed(torch.device("cpu"))
trainer = build_trainer(cfg, load_prepared(cfg), RunDir(cfg.run_dir), device, ctx, GracefulStop(), False)
trainer.optimization.net.train()
groups = itertools.islice(trainer.data.steps_from(0, 0), steps)
tokens = [trainer.optimization.step(group)[0] for group in groups]
if ctx.is_main:
    torch.save({"state_dict": trainer.model.state_dict(), "tokens": tokens}, out)
shutdown_distributed()
