"""A `Trainer` from a config: the parts the loop orchestrates, each made by its own builder.

model         model.builders.build_model, by the architecture name checkpoints record
data          data.loader.TrainingData: this rank's batches, read from the memory map
optimization  training.optim.Optimization around the training step (training.step.BatchLoss),
              stepping `net`: the model, in DDP under torchrun, compiled if asked
cadence       training.cadence.Cadence: stop signals and between-validation saves
"""

from __future__ import annotations

import os
from typing import cast

import torch
from torch import nn

from ..config import Config
from ..data.augment import Augmentation
from ..data.loader import TrainingData
from ..data.prepared import Prepared
from ..errors import UsageError
from ..host.device import autocast_dtype
from ..host.machine import available_cpus
from ..host.threads import FixedThreads, Setting, Threads, ThreadTuner
from ..model.builders import build_model
from .cadence import Cadence
from .distributed import DistContext
from .loop import Trainer
from .mix_plan import mix_plan
from .optim import Optimization
from .run_data import data_identity, training_split
from .run_dir import RunDir, run_identity
from .signals import GracefulStop
from .step import criterion


def build_trainer(
    cfg: Config,
    prepared: Prepared,
    run: RunDir,
    device: torch.device,
    dist: DistContext,
    stop: GracefulStop,
    show_progress: bool,
    identity: str | None = None,
) -> Trainer:
    """Sets torch's threads (train.threads: see `training_threads`) and seeds its RNG with
    train.seed + rank first: the model's initial weights and the dropout stream are the run's.
    `identity`: the run's (run_dir.run_identity; by default that of `cfg` on `prepared` without
    a parent)."""
    tc = cfg.train
    threads = training_threads(tc.threads, device, dist)
    torch.manual_seed(tc.seed + dist.rank)
    tokenizers = prepared.tokenizers
    if getattr(cfg.model, "share_embeddings", False) and not tokenizers.same_vocabulary():  # a Transformer's
        raise UsageError(
            f"model.share_embeddings needs one vocabulary for both sides; the "
            f"{tokenizers.src.kind} tokenizers of {prepared.folder} have two"
        )
    model = build_model(
        cfg.model.architecture,
        cfg.model,
        tokenizers.src.vocab_size,
        tokenizers.tgt.vocab_size,
        tokenizers.src.ids,
        tokenizers.tgt.ids,
    ).to(device)
    optimization = Optimization(
        model,
        training_module(model, dist, device, tc.compile),
        criterion(tc, tokenizers.tgt.ids.pad),
        tc,
        device,
        autocast_dtype(device, tc.precision),
        dist,
    )
    data = TrainingData(
        cfg,
        training_split(cfg, prepared),
        Augmentation.from_config(cfg, tokenizers, mix_plan(cfg).batch_transforms()),
        dist.rank,
        dist.world_size,
        pin_memory=device.type == "cuda",
    )
    return Trainer(
        cfg,
        prepared,
        run,
        model,
        data,
        optimization,
        Cadence(tc, stop, dist, device),
        identity or run_identity(cfg, data_identity(cfg, prepared)),
        show_progress,
        threads,
    )


def training_threads(setting: Setting, device: torch.device, dist: DistContext) -> Threads:
    """torch's threads for training, set now: a number fixes them; `auto` (or null) tunes them
    from the step times in one process on the CPU (threads.ThreadTuner, starting at the count
    the CPUs left free by other work hold), and elsewhere fixes
    them at the CPUs this process may use, shared among the processes of this machine under
    torchrun (each rank's step waits for the others, so its own times do not measure its
    threads; on a GPU the CPU threads only feed it)."""
    if isinstance(setting, int):
        return FixedThreads(setting, what="train.threads")
    cpus = available_cpus()
    if dist.enabled:
        local = int(os.environ.get("LOCAL_WORLD_SIZE", dist.world_size))
        return FixedThreads(max(1, cpus // max(1, local)), what="train.threads auto", why="under torchrun")
    if device.type != "cpu" or cpus == 1:
        return FixedThreads(cpus, what="train.threads auto", why=f"on {device.type}" if cpus > 1 else "one CPU")
    return ThreadTuner.from_load("train.threads", "tokens", cpus)


def training_module(model: nn.Module, dist: DistContext, device: torch.device, compile: bool) -> nn.Module:
    """The module that trains: `model`, in DDP under torchrun, compiled if asked."""
    net: nn.Module = model
    if dist.enabled:
        net = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    if compile:
        net = cast(nn.Module, torch.compile(net, dynamic=True))  # an OptimizedModule
    return net
