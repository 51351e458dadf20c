"""The training loop: steps, validation, best/last checkpoints, early stopping, resume.

Where a run stands lives in `Progress` (training/progress.py, with the decisions taken from
it), which is saved in `last.pt` together with the model, optimizer, schedule and RNG states.
The batch plan of an epoch is a function of (seed, epoch), so a resumed run replays exactly
the batches it had not done yet and, on the same machine, reproduces the uninterrupted run's
numbers.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import asdict, fields
from datetime import datetime, timezone
from typing import Any

import torch

from ..allocator import release_freed_memory
from ..checkpoint import save_checkpoint
from ..config import Config, TrainConfig
from ..data.augment import Augmentation
from ..data.batching import Batch
from ..data.loader import TrainingData
from ..data.preprocess import Prepared
from ..device import autocast_dtype, default_threads, rng_state, set_rng_state
from ..errors import StoppedBySignal, TfmError, UsageError
from ..evaluate import LossResult, corpus_nll, loss_result
from ..model.builders import build_model
from ..model.transformer import Seq2SeqTransformer
from .averaging import Snapshots, trying_weights
from .distributed import Agreement, DistContext
from .optim import build_optimizer, build_scheduler
from .progress import Progress, may_continue, should_stop, validation_due_within_epoch
from .run_dir import RunDir
from .signals import GracefulStop, StopRequested
from .step import BatchLoss
from .validation import TensorBoard, record_line, validation_bleu, validation_record

log = logging.getLogger("tfm")

# Settings that may change between sessions of one run without starting it over (schema metadata).
RESUMABLE_CHANGES = {f.name for f in fields(TrainConfig) if f.metadata.get("resumable")}

StopCheck = Callable[[], object]


def run_identity(cfg: Config, data_fingerprint: str) -> str:
    """What makes two sessions the same run: the data, tokenizer, model and optimization."""
    d = cfg.to_dict()
    train = {k: v for k, v in d["train"].items() if k not in RESUMABLE_CHANGES}
    payload = {"data": data_fingerprint, "tokenizer": d["tokenizer"], "model": d["model"], "train": train}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class Trainer:
    """Trains `cfg`'s model on `prepared` data inside `run`; see `run()`."""

    def __init__(self, cfg: Config, prepared: Prepared, run: RunDir, device: torch.device,
                 dist_ctx: DistContext, stop: GracefulStop, show_progress: bool):
        self.cfg, self.prepared, self.run_dir, self.device = cfg, prepared, run, device
        self.dist, self.stop, self.show_progress = dist_ctx, stop, show_progress
        tc = cfg.train
        torch.set_num_threads(tc.threads or default_threads())
        torch.manual_seed(tc.seed + dist_ctx.rank)
        self.dtype = autocast_dtype(device, tc.precision)
        # fp16 overflows where bf16 does not: scale the loss, skip steps whose gradients overflow.
        self.scaler = (torch.amp.GradScaler(device.type) if self.dtype == torch.float16 else None)
        tokenizers = prepared.tokenizers
        self.model = build_model(Seq2SeqTransformer.ARCHITECTURE, cfg.model, tokenizers.src.vocab_size,
                                 tokenizers.tgt.vocab_size).to(device)
        self.batch_loss = BatchLoss.from_config(tc)
        self.optimizer = build_optimizer(self.model, tc, device)
        self.scheduler = build_scheduler(self.optimizer, tc)
        self.data = TrainingData(cfg, prepared.split("train"), Augmentation.from_config(cfg, tokenizers),
                                 dist_ctx.rank, dist_ctx.world_size, pin_memory=device.type == "cuda")
        self.valid_split = prepared.split("val")
        self.identity = run_identity(cfg, prepared.manifest["fingerprint"])
        # Words (+1 for the sentence end) in the raw validation references: per-word perplexity
        # compares models whose tokenizers differ (per-token perplexity does not).
        self.valid_words = sum(len(x.split()) + 1 for x in prepared.text("val", cfg.data.tgt_lang))
        self.progress = Progress()
        self.saved_world_size = dist_ctx.world_size  # that of the checkpoint `restore` resumes
        self.snapshots = Snapshots(run.snapshots, tc.average_last)
        self.net = self._wrapped_model()
        self._epoch_nll = torch.zeros((), device=device)
        self._session_mark = time.monotonic()
        self._last_save = time.monotonic()
        self._stepped = False  # whether this session took a step yet (logged once, when it does)
        self.agreement = Agreement()  # under DDP: when the ranks next agree on stop/save
        self._tensorboard = TensorBoard(run.path / "tensorboard")

    def _wrapped_model(self) -> torch.nn.Module:
        """The module that trains: the model, in DDP under torchrun, compiled if asked."""
        net: torch.nn.Module = self.model
        if self.dist.enabled:
            net = torch.nn.parallel.DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        if self.cfg.train.compile:
            net = torch.compile(net, dynamic=True)
        return net

    # ------------------------------------------------------------------ state
    def _model_payload(self, metrics: dict[str, Any]) -> dict[str, Any]:
        return {"model": self.model.describe(), "state_dict": self.model.state_dict(),
                "tokenizer": self.prepared.tokenizers.state(), "config": self.cfg.to_dict(),
                "metrics": metrics, "data_fingerprint": self.prepared.manifest["fingerprint"],
                "run_identity": self.identity,
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}

    def _tick(self) -> None:
        now = time.monotonic()
        self.progress.elapsed_s += now - self._session_mark
        self._session_mark = now

    def save_last(self) -> None:
        """Write the resumable state (every rank joins: RNG states are gathered)."""
        self._tick()
        self.progress.epoch_nll = float(self._epoch_nll)
        rng = self.dist.all_gather_object(rng_state(self.device))  # every rank's, in rank order
        if self.dist.is_main:
            latest = self.progress.history[-1] if self.progress.history else {}
            payload = self._model_payload(latest)
            payload["train_state"] = {"progress": asdict(self.progress),
                                      "optimizer": self.optimizer.state_dict(),
                                      "scheduler": self.scheduler.state_dict(), "rng": rng,
                                      "world_size": self.dist.world_size}
            if self.scaler is not None:
                payload["train_state"]["grad_scaler"] = self.scaler.state_dict()
            save_checkpoint(self.run_dir.last, payload, keep_previous=self.run_dir.last_prev)
            self.run_dir.write_metrics(self.progress.history)
        self._last_save = time.monotonic()

    def restore(self, payload: dict[str, Any]) -> None:
        """Continue from a last.pt payload of this run."""
        state = payload["train_state"]
        self.model.load_state_dict(payload["state_dict"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.scaler is not None and "grad_scaler" in state:
            self.scaler.load_state_dict(state["grad_scaler"])
        self.progress = Progress.from_dict(state["progress"])
        self._epoch_nll = torch.tensor(self.progress.epoch_nll, device=self.device)
        # Every rank's RNG state is saved, so their count is the world size of a checkpoint
        # written before it was recorded.
        self.saved_world_size = int(state.get("world_size", len(state["rng"])))
        if self.saved_world_size == self.dist.world_size:
            set_rng_state(state["rng"][self.dist.rank], self.device)

    def _check_world_size(self) -> None:
        """Refuse to go on from a last.pt written under another number of processes: each
        rank's share of an epoch's batches and its RNG stream depend on it, so the resumed run
        would not be the one that was interrupted. (A finished run is left alone: it does not
        train.)"""
        if self.saved_world_size != self.dist.world_size:
            raise UsageError(
                f"{self.run_dir.last} was written by {self.saved_world_size} training "
                f"process(es), this is {self.dist.world_size}: resume it with "
                f"{self.saved_world_size} (torchrun --nproc_per_node, times --nnodes), or start "
                "the run over with --restart")

    def extend_if_asked(self) -> bool:
        """A finished run continues when epochs/max_steps were raised; True if it will train."""
        p = self.progress
        if not p.finished or p.pending_average:
            return True
        if may_continue(p, self.cfg.train):
            p.finished, p.stop_reason = False, None
            return True
        return False

    # ------------------------------------------------------------------ the loop
    def run(self) -> None:
        """Train until the epochs, max_steps or patience say stop; validate and save on the way."""
        self._check_world_size()
        try:
            while not self.progress.finished:
                if self.progress.pending_validation is not None:
                    self._validate()
                else:
                    self._train_until_validation()
            if self.progress.pending_average:
                if self.dist.is_main:
                    self._average_snapshots()
                self.progress.pending_average = False
                self.save_last()
        except StopRequested:
            self.save_last()  # a validation cut short stays pending: the resumed run redoes it
            signum = self.stop.signum or 15
            raise StoppedBySignal(signum, f"stopped by signal {signum}; state saved to "
                                          f"{self.run_dir.last} (run the same command to resume)") from None
        finally:
            self._tensorboard.close()

    def _check_stop(self, save_due: bool = False) -> bool:
        """Raise StopRequested if a stop signal arrived; return whether to save now.

        One process: at every call. Under DDP every rank must take the same path, so the ranks
        agree in one all-reduce (stop: any rank's signal; save: rank 0's clock) at the steps
        `agreement` names, about every AGREEMENT_S seconds rather than at every step: rank 0
        sends the next interval in steps with the flags, so every rank knows when the next
        agreement is without another collective, and no step waits on a host read-back.
        """
        requested = self.stop.signum is not None
        if self.dist.enabled:
            if not self.agreement.due(self.progress.step):
                return False
            interval = self.agreement.next_interval(self.progress.step) if self.dist.is_main else 0
            flags = torch.tensor([float(requested), float(save_due and self.dist.is_main), float(interval)],
                                 device=self.device)
            stop, save, interval = self.dist.all_reduce_sum(flags).tolist()
            requested, save_due = stop > 0, save > 0
            self.agreement.schedule(self.progress.step, int(interval))
        if requested:
            raise StopRequested(self.stop.signum or 15)
        return save_due

    def _stop_check_between_batches(self) -> StopCheck | None:
        """The stop check for validation and decoding batches. One process stops mid-validation
        on a signal; under DDP ranks may hold different numbers of validation batches, so the
        (collective) stop check waits for the next training step."""
        return None if self.dist.enabled else self._check_stop

    def train_step(self, batches: list[Batch]) -> int:
        """One optimizer step over a group of batches; returns its target-token count."""
        n_tokens = self._accumulate_gradients(batches)
        self._optimizer_step()
        return n_tokens

    def _accumulate_gradients(self, batches: list[Batch]) -> int:
        """Backward passes over each batch of the step, each summed loss divided by the target
        tokens of the whole optimizer step, so the gradient is that of one batch holding every
        pair of the step; returns this rank's target tokens. Under DDP only the last backward
        synchronises the gradients."""
        batches = [b.to(self.device) for b in batches]
        n_tokens = sum(b.n_tokens for b in batches)
        normaliser = self._loss_normaliser(n_tokens)
        for i, b in enumerate(batches):
            last = i == len(batches) - 1
            no_sync = self.net.no_sync() if self.dist.enabled and not last else contextlib.nullcontext()
            with no_sync:
                loss, nll = self.batch_loss(self.net, b, self.dtype)
                loss = loss / normaliser
                (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
            self._epoch_nll += nll
        return n_tokens

    def _loss_normaliser(self, n_tokens: int) -> int | torch.Tensor:
        """What this rank divides its summed loss by. One process: its step's target tokens.
        Under DDP the ranks' batches hold different token counts and DDP averages the ranks'
        gradients, so each rank divides by (all ranks' tokens) / world_size: the mean of the
        ranks' gradients is then the gradient of the step's total loss over its total tokens,
        as one process accumulating every rank's batches computes it (fairseq normalises by
        the all-reduced sample size likewise). The count stays on the device: no host sync."""
        if not self.dist.enabled:
            return n_tokens
        total = self.dist.all_reduce_sum(torch.tensor(float(n_tokens), device=self.device))
        return total / self.dist.world_size

    def _optimizer_step(self) -> None:
        """Clip, step (skipped by the fp16 scaler on overflow), schedule, clear the gradients."""
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)  # clip the true gradients
        if self.cfg.train.clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.train.clip_norm)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)  # skipped when the gradients overflowed
            self.scaler.update()
        else:
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)

    def _checkpoint_due_by_steps(self) -> bool:
        """train.checkpoint_every_steps: the same answer on every rank."""
        every = self.cfg.train.checkpoint_every_steps
        return bool(every and self.progress.step % every == 0)

    def _checkpoint_due_by_time(self) -> bool:
        """train.checkpoint_every_minutes on this process's clock (rank 0's decides under DDP)."""
        minutes = self.cfg.train.checkpoint_every_minutes
        return bool(minutes and time.monotonic() - self._last_save >= 60 * minutes)

    def _progress_bar(self, total: int, initial: int):
        from tqdm import tqdm

        return tqdm(total=total, initial=initial, desc=f"epoch {self.progress.epoch + 1}",
                    unit="step", leave=False, dynamic_ncols=True,
                    disable=not (self.show_progress and self.dist.is_main))

    def _show_loss(self, bar) -> None:
        """Every 20 steps: the epoch's training loss, PPL and speed so far on the bar."""
        p = self.progress
        if bar.n % 20 == 0 and not bar.disable:
            loss = float(self._epoch_nll) / max(1, p.epoch_tokens)
            bar.set_postfix(loss=f"{loss:.3f}", ppl=f"{math.exp(min(loss, 50)):.1f}",
                            tok_s=f"{p.epoch_tokens / max(p.epoch_train_s, 1e-9):.0f}")

    def _train_until_validation(self) -> None:
        """Train steps of the current epoch until a validation is due (at the latest: its end)."""
        p = self.progress
        steps = self.data.steps(p.epoch)
        self.net.train()
        batch_groups = self.data.steps_from(p.epoch, p.batch_in_epoch)
        with self._progress_bar(steps, p.batch_in_epoch) as bar, contextlib.closing(batch_groups):
            started = time.perf_counter()  # a step's time includes any wait for its batches
            for g, batches in enumerate(batch_groups, p.batch_in_epoch):
                p.epoch_tokens += self.train_step(batches)
                p.epoch_train_s += time.perf_counter() - started
                p.step += 1
                p.batch_in_epoch = g + 1
                if not self._stepped and self.dist.is_main:
                    log.info("first optimizer step done (step %d, epoch %d: %d steps)", p.step,
                             p.epoch + 1, steps)
                    self._stepped = True
                bar.update()
                self._show_loss(bar)
                save_due = self._check_stop(self._checkpoint_due_by_time()) or self._checkpoint_due_by_steps()
                if g + 1 == steps:
                    break  # the epoch's end takes its own snapshot
                self._snapshot_if_due()
                if validation_due_within_epoch(p, self.cfg.train):
                    p.pending_validation = "step"
                    return
                if save_due:
                    self.save_last()
                started = time.perf_counter()
        p.epoch += 1
        p.batch_in_epoch = 0
        p.pending_validation = "epoch"

    # ------------------------------------------------------------------ validation
    def _validate(self) -> None:
        """The pending validation: measure, record, keep the best, decide to stop, save."""
        p, tc = self.progress, self.cfg.train
        end_of_epoch = p.pending_validation == "epoch"
        train, valid = self._measure()
        self._stop_if_diverged(train.loss, valid.loss)
        self._tick()
        record = validation_record(p, end_of_epoch, train, valid, self.valid_words,
                                   self.scheduler.get_last_lr()[0])
        if tc.valid_bleu:
            record.update(validation_bleu(self.model, self.prepared, self.cfg, self.device,
                                          self.dtype, self._stop_check_between_batches(), self.dist))
        improved = p.note_validation(valid.loss)
        p.history.append(record)
        if self.dist.is_main:
            self._save_validated(record, improved, end_of_epoch)
            self._log_record(record, improved)
        if end_of_epoch:
            self._epoch_nll.zero_()
            p.start_epoch_totals()
        p.pending_validation = None
        reason = should_stop(p, tc, end_of_epoch)
        if reason == "early_stopping":
            log.info("early stopping: no improvement in %d validations", p.bad_validations)
        p.finish_if(reason, tc.average_last)
        self.save_last()
        release_freed_memory()  # what validation's decoding freed (glibc keeps it otherwise)

    def _valid_nll(self, shard: tuple[int, int] = (0, 1)) -> tuple[torch.Tensor, torch.Tensor]:
        """Summed validation NLL and target tokens of `shard` (0-dim tensors on the device)."""
        return corpus_nll(self.model, self.valid_split, self.device, self.dtype,
                          max_len=self.cfg.model.max_len, shard=shard,
                          check_stop=self._stop_check_between_batches())

    def _measure(self) -> tuple[LossResult, LossResult]:
        """The epoch's training loss so far and the validation loss, both over all ranks."""
        nll, tokens = self._valid_nll((self.dist.rank, self.dist.world_size))
        valid = loss_result(self.dist.all_reduce_sum(nll), self.dist.all_reduce_sum(tokens))
        train_nll = float(self.dist.all_reduce_sum(self._epoch_nll.clone()))
        epoch_tokens = torch.tensor(self.progress.epoch_tokens, device=self.device)
        train_tokens = int(self.dist.all_reduce_sum(epoch_tokens))
        return loss_result(torch.tensor(train_nll), torch.tensor(train_tokens)), valid

    def _stop_if_diverged(self, train_loss: float, valid_loss: float) -> None:
        """A non-finite loss ends the run with an error: nothing is saved or promoted from it."""
        if math.isfinite(train_loss) and math.isfinite(valid_loss):
            return
        raise TfmError(f"training diverged: train loss {train_loss}, validation loss {valid_loss} "
                       f"at step {self.progress.step} (train.lr={self.cfg.train.lr}); nothing was "
                       "saved or promoted from it: lower train.lr (or set train.clip_norm) and run "
                       "again")

    def _save_validated(self, record: dict[str, Any], improved: bool, end_of_epoch: bool) -> None:
        """best.pt when the validation improved; an epoch's snapshot when averaging is on."""
        if improved:
            save_checkpoint(self.run_dir.best, self._model_payload(record))
        if end_of_epoch and self.snapshots.enabled:
            self.snapshots.add(self.progress.step, self._model_payload(record))

    def _snapshot_if_due(self) -> None:
        """Within an epoch: a snapshot for averaging every train.snapshot_every_steps steps."""
        every, p = self.cfg.train.snapshot_every_steps, self.progress
        if every and self.snapshots.enabled and self.dist.is_main and p.step % every == 0:
            self.snapshots.add(p.step, self._model_payload(p.history[-1] if p.history else {}))

    def _log_record(self, r: dict[str, Any], improved: bool) -> None:
        log.info("%s", record_line(r, improved))
        if self.cfg.train.tensorboard:
            self._tensorboard.add(r)

    # ------------------------------------------------------------------ averaging
    def _average_snapshots(self) -> None:
        """Average the kept snapshots; the average becomes best.pt if it validates better.
        last.pt keeps the trained weights either way."""
        averaged = self.snapshots.average()
        if averaged is None:
            return
        state, n = averaged
        best = self.progress.best_valid_loss
        with trying_weights(self.model, state):
            valid = loss_result(*self._valid_nll())
            log.info("average of the last %d snapshots: Val. Loss %.3f | Val. PPL %.3f (best single: "
                     "%.3f)", n, valid.loss, valid.ppl, best)
            if valid.loss < best:
                record = {**self.progress.history[-1], "valid_loss": round(valid.loss, 5),
                          "valid_ppl": round(valid.ppl, 4), "averaged_snapshots": n}
                save_checkpoint(self.run_dir.best, self._model_payload(record))
                self.progress.best_valid_loss = valid.loss
