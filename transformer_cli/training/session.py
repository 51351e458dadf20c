"""One `tfm train` invocation: lock, data, resume or start, train, publish.

Re-running the same command is always safe: it waits for nothing (a locked run exits 75),
continues an interrupted run where its last checkpoint left it, does nothing for a finished
run whose inputs did not change, and starts over when the data or settings did. A session of
a run from scratch behind the nights (training/scratch.py) trains until its window ends, saves
as on a stop signal, and leaves the gate to the job.
"""

from __future__ import annotations

import copy
import logging
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import torch

from ..checkpoint import Checkpoint, CheckpointError
from ..config import Config
from ..corrections.training import trained_on
from ..data import folder_lock
from ..data.prepared import Prepared
from ..errors import StoppedBySignal
from ..fsutil import atomic_write_json, atomic_write_text
from ..host import allocator, priority
from ..host.device import resolve_device
from ..provenance import git_commit, package_versions
from ..synthetic.mixture import help_translate
from ..synthetic.sharing import threads_each
from .build import build_trainer
from .distributed import DistContext, init_distributed, peer_lost, shutdown_distributed
from .held_out import HeldOut
from .loop import Trainer
from .metrics import described
from .parent import Parent, continued_config, resolve_parent
from .progress import Progress
from .promotion import Decision, GateRules, Metric, Policy, Scorer, promote
from .replay import Seen, seen_of, start_night
from .retrain_policy import training_record
from .run_dir import RunDir
from .run_start import RunStart, start_other_rank, start_run
from .scratch_run import ScratchRun
from .signals import GracefulStop, StopRequested
from .vocabulary_growth import grown_weights

log = logging.getLogger("tfm")


@dataclass
class TrainOutcome:
    trained: bool  # False when the run had already finished (a no-op)
    progress: Progress
    promotion: Decision | None  # None on the ranks other than the first


def _resume_checkpoint(run: RunDir, identity: str) -> Checkpoint | None:
    """The newest readable checkpoint of this same run, or None to start from scratch."""
    found = damaged = False
    for path in (run.last, run.last_prev):
        if not path.exists():
            continue
        found = True
        try:
            checkpoint = Checkpoint.read(path)
        except CheckpointError as e:
            log.warning("%s; trying the previous checkpoint", e)
            damaged = damaged or path == run.last  # last.pt exists but cannot be used
            continue
        if checkpoint.run_identity != identity or checkpoint.train_state is None:
            log.warning(
                "%s was trained with other data or settings: starting a new run "
                "(the published model stays until a better one is promoted)",
                path,
            )
            return None
        if path == run.last_prev:
            log.warning("resuming from %s", path)
            if damaged:  # else the next save would rotate it into last.prev.pt over this good one
                aside = run.path / "last.pt.damaged"
                os.replace(run.last, aside)
                log.warning("moved the damaged checkpoint aside to %s", aside)
        return checkpoint
    if found:
        log.warning("no readable checkpoint in %s: starting over", run.path)
    return None


def clear_run(run: RunDir) -> None:
    """Remove the state of an earlier run; published.pt and promotions.log stay."""
    for path in (run.last, run.last_prev, run.best, run.metrics, run.curves):
        path.unlink(missing_ok=True)
    shutil.rmtree(run.snapshots, ignore_errors=True)


def run_training(
    cfg: Config,
    restart: bool = False,
    show_progress: bool = False,
    run: RunDir | None = None,
    scratch: ScratchRun | None = None,
) -> TrainOutcome:
    """One `tfm train`. `run` may come already locked (the CLI locks before importing torch).
    `scratch`: a session of the run from scratch behind the nights (one process; no gate),
    stopped as by a signal (signals.WINDOW_ENDED) when its window has passed."""
    device = resolve_device(cfg.train.device)
    dist_ctx, device = init_distributed(device, cfg.train.collective_timeout_min, cfg.train.rendezvous_timeout_s)
    run = run or RunDir(cfg.run_dir)
    handler = None
    in_order = False  # whether this process ends as every rank does (for the others' peer watch)
    stop = GracefulStop()
    stage = Stage()
    data_held = False  # the data folder, held for reading while this session uses it
    try:
        parent = None
        if dist_ctx.is_main:
            if not run.locked:
                run.lock()
            handler = run.attach_log(log)
            log.info("tfm %s", " ".join(sys.argv[1:]))
            parent = resolve_parent(cfg, run)  # refused (exit 2) before anything is made
        stop.__enter__()  # from here on a signal is honoured at the next safe point
        start = _started(cfg, run, parent, dist_ctx, stop, restart, stage, scratch)
        data_held = True
        if scratch is not None:  # the window counts from here: the data is prepared once
            stop.until(time.monotonic() + 60 * scratch.window_minutes)
        outcome = _trained(cfg, run, start, device, dist_ctx, stop, show_progress, restart, stage, scratch is not None)
        in_order = True
        return outcome
    except StoppedBySignal:  # every rank stopped at the same step
        in_order = True
        raise
    except StopRequested as e:  # outside the loop (which saves and raises StoppedBySignal itself)
        in_order = True
        raise StoppedBySignal(
            e.signum,
            f"stopped by signal {e.signum} while {stage.now}; nothing half-done was kept "
            "(run the same command to go on)",
        ) from None
    except RuntimeError as e:
        lost = peer_lost(e, dist_ctx)
        if lost is None:
            raise
        raise lost from None
    finally:
        stop.__exit__(None, None, None)
        if data_held:
            folder_lock.release(cfg.data_dir)
        if handler is not None:
            log.removeHandler(handler)
            handler.close()
        run.unlock()
        shutdown_distributed(in_order)


@dataclass
class Stage:
    """What a session is doing, for the line a stop signal outside the training loop gets."""

    now: str = "preparing the data"


def _started(
    cfg: Config,
    run: RunDir,
    parent: Parent | None,
    dist_ctx: DistContext,
    stop: GracefulStop,
    restart: bool,
    stage: Stage,
    scratch: ScratchRun | None = None,
) -> RunStart:
    """The run's start on every rank: the first prepares the data and takes train.retrain's
    decision (translating text first for a config that makes pairs, the other ranks beside it),
    the others then read what it made."""
    if dist_ctx.is_main:
        if cfg.synthetic.enabled:
            stage.now = "making the synthetic corpus (the translations so far are kept)"
        start = start_run(cfg, run, parent, stop.check, restart, scratch)  # train.retrain decides here
    elif cfg.synthetic.enabled:  # the other ranks share the translating, not wait for it
        stage.now = "translating text beside the first rank (the translations so far are kept)"
        help_translate(_helping(cfg, dist_ctx.world_size), stop.check)
    dist_ctx.barrier()
    if not dist_ctx.is_main:
        start = start_other_rank(cfg, run, resolve_parent(cfg, run, repair=False))
    return start


def _trained(
    cfg: Config,
    run: RunDir,
    start: RunStart,
    device: torch.device,
    dist_ctx: DistContext,
    stop: GracefulStop,
    show_progress: bool,
    restart: bool,
    stage: Stage,
    scratch: bool = False,
) -> TrainOutcome:
    """Train the started run (resumed, begun, or found finished), then, on the first rank,
    decide its promotion (not for a run from scratch behind the nights: `scratch`)."""
    prepared, parent = start.prepared, start.parent
    trainer = build_trainer(
        _trained_config(cfg, start), prepared, run, device, dist_ctx, stop, show_progress, start.identity
    )
    pairs = prepared.manifest.training_pairs
    trainer.training = training_record(pairs, parent.checkpoint if parent else None, start.decision)
    if (corrections := trained_on(cfg)) is not None and cfg.corrections.store is not None:
        trainer.training["corrections"] = corrections  # what serving's near-matches leave to the model
    held_out = None
    if cfg.train.retrain.night == "replay" and (cfg.train.init_from is not None or scratch):
        seen, held_out = _night(cfg, run, trainer, start, dist_ctx.is_main)
        trainer.training["seen_sha256"] = seen.sha256
        if held_out is not None:
            trainer.training["held_out"] = held_out.record()
    resumed = _resume_or_start(trainer, restart, parent, prepared)
    trained = trainer.extend_if_asked()
    if resumed and trained and start.decision is not None and not start.fresh and dist_ctx.is_main:
        log.info("continued training: as this run decided when it started: %s", start.decision.outcome)
    p = trainer.progress
    if not trained:
        log.info(
            "run %s already finished (%s, step %d, best Val. Loss %.3f): nothing to do; --restart trains it again",
            run.path,
            p.stop_reason,
            p.step,
            p.best_valid_loss,
        )
    else:
        stage.now = "training"
        _train(trainer, resumed)
    decision = None
    if dist_ctx.is_main and not scratch:
        stage.now = "deciding the promotion"
        decision = _promote(cfg, run, prepared, device, stop, start, held_out)
    return TrainOutcome(trained, p, decision)


def _helping(cfg: Config, world_size: int) -> Config:
    """`cfg` for a rank that translates beside the first: its share of the CPUs as its threads."""
    out = copy.copy(cfg)
    out.train = copy.copy(cfg.train)
    out.train.threads = threads_each(cfg, world_size)
    return out


def _night(cfg: Config, run: RunDir, trainer: Trainer, start: RunStart, main: bool) -> tuple[Seen, HeldOut | None]:
    """The run's seen set kept, and on a replay night its pairs chosen (training/replay.py);
    the set, and the new pairs held out for the gate (training/held_out.py)."""
    replays = start.decision is not None and start.decision.replay and start.parent is not None
    prior = seen_of(start.parent.path, start.parent.checkpoint.training) if replays and start.parent else None
    if replays and prior is None and main:
        log.warning("warning: the published model's seen set is gone: this night trains every pair")
    return start_night(trainer.data, run.path, prior, cfg.train.retrain, main)


def _trained_config(cfg: Config, start: RunStart) -> Config:
    """What the run trains with: `cfg`, or from a parent parent.continued_config with
    train.retrain's epochs."""
    if start.parent is None:
        return cfg
    trained = continued_config(cfg, start.parent)
    if start.decision is not None:
        trained.train.epochs = start.decision.epochs
        cap = cfg.train.retrain.replay_max_steps
        if start.decision.replay and cap is not None:
            trained.train.max_steps = min(cap, trained.train.max_steps or cap)
    return trained


def _resume_or_start(trainer: Trainer, restart: bool, parent: Parent | None, prepared: Prepared) -> bool:
    """Restore this run's newest readable checkpoint, or clear the run folder for a new start
    (every rank waits for that) from `parent`'s weights when there is one (with rows for the
    pieces a grown vocabulary added: training/vocabulary_growth.py); returns whether the run
    resumed."""
    checkpoint = None if restart else _resume_checkpoint(trainer.run_dir, trainer.identity)
    if checkpoint is None:
        if trainer.dist.is_main:
            clear_run(trainer.run_dir)
        trainer.dist.barrier()
        if parent is not None:
            weights = parent.checkpoint.weights
            if prepared.tokenizers.vocabulary_digest() != parent.pair.vocabulary_digest():
                weights = grown_weights(weights, parent.pair, prepared.tokenizers, trainer.model.state_dict())
            trainer.start_from(weights, parent.record)
            if trainer.dist.is_main:
                log.info(
                    "continuing %s (sha256 %s, %s): its weights and tokenizers; optimizer, "
                    "schedule and early stopping start afresh",
                    parent.path,
                    parent.checkpoint.digest[:12],
                    described(parent.checkpoint.metrics),
                )
        return False
    trainer.restore(checkpoint)
    return True


def _train(trainer: Trainer, resumed: bool) -> None:
    """Write the run's files, train to the end, draw the curves (files and logs: rank 0)."""
    cfg, run, p, main = trainer.cfg, trainer.run_dir, trainer.progress, trainer.dist.is_main
    if main:
        _write_run_files(cfg, run, trainer, trainer.device, trainer.dist.world_size)
        what = f"resuming at epoch {p.epoch + 1}, step {p.step}" if resumed else "starting"
        log.info(
            "%s: %s on %s (%s, %s), %.2fM parameters, %d train pairs",
            run.path,
            what,
            trainer.device,
            trainer.dtype or "fp32",
            allocator.describe(),
            trainer.model.num_parameters() / 1e6,
            len(trainer.data.split),
        )
        log.info("%s; priority: %s", trainer.threads.describe(), priority.describe())
    trainer.run()
    if main:
        from ..plots import plot_curves

        if said := trainer.threads.summary():
            log.info(said)
        plot_curves(p.history, run.curves, title=cfg.name)
        log.info(
            "finished (%s) after %d steps in %.0f s; best Val. Loss %.3f (PPL %.3f)",
            p.stop_reason,
            p.step,
            p.elapsed_s,
            p.best_valid_loss,
            math.exp(p.best_valid_loss),
        )


def _promote(
    cfg: Config,
    run: RunDir,
    prepared: Prepared,
    device: torch.device,
    stop: GracefulStop,
    start: RunStart,
    held_out: HeldOut | None,
) -> Decision:
    """The promotion gate on best.pt, scored on the current validation data and the night's
    `held_out` new pairs; logged, with train.retrain's decision that started the run."""
    scorer = Scorer(prepared, cfg.data.src_lang, cfg.data.tgt_lang, device, cfg.train.precision, stop.check, held_out)
    decision = promote(
        run,
        Policy(cfg.train.promote),
        Metric(cfg.train.promote_metric),
        scorer,
        GateRules.from_config(cfg.train),
        start.decision.record() if start.decision is not None else None,
    )
    log.info("promotion: %s -> %s", decision.text, run.published)
    return decision


def _write_run_files(cfg: Config, run: RunDir, trainer: Trainer, device: Any, world_size: int) -> None:
    atomic_write_text(run.config, cfg.to_yaml())
    manifest = {
        "name": cfg.name,
        "run_identity": trainer.identity,
        "data_fingerprint": trainer.prepared.fingerprint,
        "data_files": trainer.prepared.manifest.files,
        "seed": cfg.train.seed,
        "device": str(device),
        "precision": str(trainer.dtype or "fp32"),
        "world_size": world_size,
        "parameters": trainer.model.num_parameters(),
        "versions": package_versions(),
        "git_commit": git_commit(),
        "command": sys.argv,
        "session_started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "resumed_at_step": trainer.progress.step or None,
        "parent": trainer.parent,
        "training": trainer.training,
    }
    atomic_write_json(run.manifest, manifest)
