"""The training loop: steps, validation, best/last checkpoints, early stopping, resume.

`Trainer` orchestrates parts it is given (training/build.py makes them from the config): the
model, the batch iterator (`data.loader.TrainingData`), the optimizer steps (`Optimization`,
around the training step `BatchLoss`), the stop/save cadence and the snapshots to average.
Where a run stands lives in `Progress` (training/progress.py, with the decisions taken from
it), which last.pt stores with the model, optimizer, schedule and RNG states. The batch plan
of an epoch is a function of (seed, epoch), so a resumed run replays exactly the batches it
had not done yet and, on the same machine, reproduces the uninterrupted run's numbers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from dataclasses import asdict
from datetime import datetime, timezone
from typing import Any

import torch

from ..checkpoint import Checkpoint, TrainState
from ..config import Config
from ..contracts.model import TranslationModel
from ..data.loader import WORKER_LOSS, TrainingData
from ..data.prepared import Prepared
from ..errors import StoppedBySignal
from ..evaluate import LossResult, loss_result
from ..host.allocator import release_freed_memory
from ..host.device import rng_state, set_rng_state
from ..host.threads import FixedThreads, Threads
from ..inference.teacher_forcing import corpus_nll, scoring_batches
from .averaging import Snapshots, trying_weights
from .cadence import Cadence
from .console import epoch_bar, show_loss
from .distributed import check_same_world_size
from .metrics import ValidationRecord
from .optim import Optimization
from .progress import Progress, may_continue, should_stop, validation_due_within_epoch
from .run_dir import RunDir
from .signals import StopRequested
from .validation import TensorBoard, check_finite, validation_bleu, validation_record

log = logging.getLogger("tfm")


class Trainer:
    """Trains `model` on `data` inside `run`; see `run()`."""

    def __init__(
        self,
        cfg: Config,
        prepared: Prepared,
        run: RunDir,
        model: TranslationModel[Any],
        data: TrainingData,
        optimization: Optimization,
        cadence: Cadence,
        identity: str,
        show_progress: bool,
        threads: Threads | None = None,
    ):
        self.cfg, self.prepared, self.run_dir, self.model, self.data = cfg, prepared, run, model, data
        # torch's threads: told every step's tokens and time (a tuner may change them between
        # steps; validation decodes with the count in use)
        self.threads: Threads = threads or FixedThreads(torch.get_num_threads(), apply=lambda n: None)
        self.optimization, self.cadence, self.identity = optimization, cadence, identity
        self.device, self.dist, self.dtype = optimization.device, optimization.dist, optimization.dtype
        self.show_progress = show_progress
        self.valid_split = prepared.split("val")
        # Words (+1 for the sentence end) in the raw validation references: per-word perplexity
        # compares models whose tokenizers differ (per-token perplexity does not).
        self.valid_words = sum(len(x.split()) + 1 for x in prepared.text("val", cfg.data.tgt_lang))
        self.progress = Progress()
        self.saved_world_size = self.dist.world_size  # that of the checkpoint `restore` resumes
        self.snapshots = Snapshots(run.snapshots, cfg.train.average_last)
        self._epoch_nll = torch.zeros((), device=self.device)  # this rank's, on the device
        self._session_mark = time.monotonic()
        self._stepped = False  # whether this session took a step yet (logged once, when it does)
        self._tensorboard = TensorBoard(run.path / "tensorboard")
        self.parent: dict[str, Any] | None = None  # the model the run started from (its record)
        self.training: dict[str, Any] | None = None  # what checkpoints record of the training (retrain_policy.py)

    # ------------------------------------------------------------------ state
    def checkpoint(self, record: ValidationRecord | None) -> Checkpoint:
        """The current weights with what translates them, where they came from, and `record`,
        the validation that describes them (None: no validation yet)."""
        m = self.model  # its architecture as the config names it (a dotted path too: registry.py)
        return Checkpoint(
            self.cfg.model.architecture,
            m.src_vocab_size,
            m.tgt_vocab_size,
            m.state_dict(),
            self.prepared.tokenizers.state(),
            self.cfg.to_dict(),
            record.to_json() if record else {},
            self.prepared.fingerprint,
            self.identity,
            datetime.now(timezone.utc).isoformat(timespec="seconds"),
            parent=self.parent,
            training=self.training,
        )

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
            checkpoint = self.checkpoint(self.progress.last_record)
            checkpoint.train_state = TrainState(
                progress=asdict(self.progress), rng=rng, world_size=self.dist.world_size, **self.optimization.state()
            )
            checkpoint.write(self.run_dir.last, keep_previous=self.run_dir.last_prev)
            self.run_dir.write_metrics(self.progress.history)
        self.cadence.saved()

    def restore(self, checkpoint: Checkpoint) -> None:
        """Continue from this run's last.pt."""
        state = checkpoint.train_state
        assert state is not None, "restore() takes a last.pt"
        self.model.load_state_dict(checkpoint.weights)
        self.optimization.load_state(state)
        self.progress = Progress.from_dict(state.progress)
        self._epoch_nll = torch.tensor(self.progress.epoch_nll, device=self.device)
        self.saved_world_size = state.world_size
        self.parent = checkpoint.parent
        if self.saved_world_size == self.dist.world_size:
            set_rng_state(state.rng[self.dist.rank], self.device)

    def start_from(self, weights: dict[str, torch.Tensor], parent: dict[str, Any]) -> None:
        """A new run's weights from the model it continues (`parent`: its record, kept in
        every checkpoint of the run); everything else starts afresh."""
        self.model.load_state_dict(weights)
        self.parent = parent

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
        # (A finished run whose world size differs is left alone: it does not train.)
        check_same_world_size(self.run_dir.last, self.saved_world_size, self.dist.world_size)
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
        except StopRequested as e:
            self.save_last()  # a validation cut short stays pending: the resumed run redoes it
            said = (
                (f"stopped by signal {e.signum}; state saved to {self.run_dir.last} (run the same command to resume)")
                if self.dist.is_main
                else ""
            )  # one line for all ranks
            raise StoppedBySignal(e.signum, said) from None
        except WORKER_LOSS as e:  # torch's, raised mid-step: see worker_failure
            failure = self.data.worker_failure(e)
            if failure is None:
                raise
            raise failure from None
        finally:
            self._tensorboard.close()

    def _train_until_validation(self) -> None:
        """Train steps of the current epoch until a validation is due (at the latest: its end)."""
        p = self.progress
        steps = self.data.steps(p.epoch)
        self.optimization.net.train()
        batch_groups = self.data.steps_from(p.epoch, p.batch_in_epoch)
        bar = epoch_bar(p, steps, self.show_progress and self.dist.is_main)
        with bar, contextlib.closing(batch_groups):
            started = time.perf_counter()  # a step's time includes any wait for its batches
            for g, batches in enumerate(batch_groups, p.batch_in_epoch):
                tokens, nll = self.optimization.step(batches)
                self._epoch_nll += nll
                p.epoch_tokens += tokens
                step_s = time.perf_counter() - started
                p.epoch_train_s += step_s
                self.threads.record(tokens, step_s)
                p.step, p.batch_in_epoch = p.step + 1, g + 1
                self._log_first_step(steps)
                bar.update()
                show_loss(bar, p, self._epoch_nll)
                save_due = self.cadence.after_step(p.step, epoch_end=g + 1 == steps)
                if g + 1 == steps:
                    break  # the epoch's end takes its own snapshot
                self._snapshot_if_due()
                if validation_due_within_epoch(p, self.cfg.train):
                    p.pending_validation = "step"
                    return
                if save_due:
                    self.save_last()
                started = time.perf_counter()
        p.epoch, p.batch_in_epoch, p.pending_validation = p.epoch + 1, 0, "epoch"

    def _log_first_step(self, steps: int) -> None:
        if not self._stepped and self.dist.is_main:
            log.info(
                "first optimizer step done (step %d, epoch %d: %d steps)",
                self.progress.step,
                self.progress.epoch + 1,
                steps,
            )
        self._stepped = True

    # ------------------------------------------------------------------ validation
    def _validate(self) -> None:
        """The pending validation: measure, record, keep the best, decide to stop, save."""
        p, tc = self.progress, self.cfg.train
        end_of_epoch = p.pending_validation == "epoch"
        train, valid = self._measure()
        check_finite(train, valid, p.step, tc.lr)
        self._tick()
        record = validation_record(p, end_of_epoch, train, valid, self.valid_words, self.optimization.lr)
        if tc.valid_bleu:
            record = dataclasses.replace(
                record,
                **validation_bleu(
                    self.model, self.prepared, self.cfg, self.device, self.dtype, self.cadence, self.dist
                ),
            )
        improved = p.note_validation(valid.loss)
        p.history.append(record)
        if self.dist.is_main:
            if improved:
                self.checkpoint(record).write(self.run_dir.best)
            if end_of_epoch and self.snapshots.enabled:
                self.snapshots.add(p.step, self.checkpoint(record))
            log.info("%s", record.line(improved))
            if tc.tensorboard:
                self._tensorboard.add(record)
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

    def _valid_nll(self, shard: tuple[int, int] = (0, 1), alone: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Summed validation NLL and target tokens of `shard` (0-dim tensors on the device);
        `alone`: only this rank scores (see Cadence.between_batches)."""
        check = self.cadence.between_batches(len(scoring_batches(self.valid_split, shard)), alone)
        out = corpus_nll(
            self.model,
            self.valid_split,
            self.device,
            self.dtype,
            max_positions=self.cfg.model.max_len,
            shard=shard,
            check_stop=check,
        )
        check.finish()
        return out

    def _measure(self) -> tuple[LossResult, LossResult]:
        """The epoch's training loss so far and the validation loss, both over all ranks."""
        nll, tokens = self._valid_nll((self.dist.rank, self.dist.world_size))
        valid = loss_result(self.dist.all_reduce_sum(nll), self.dist.all_reduce_sum(tokens))
        train_nll = float(self.dist.all_reduce_sum(self._epoch_nll.clone()))
        epoch_tokens = torch.tensor(self.progress.epoch_tokens, device=self.device)
        train_tokens = int(self.dist.all_reduce_sum(epoch_tokens))
        return loss_result(torch.tensor(train_nll), torch.tensor(train_tokens)), valid

    def _snapshot_if_due(self) -> None:
        """Within an epoch: a snapshot for averaging every train.snapshot_every_steps steps."""
        every, p = self.cfg.train.snapshot_every_steps, self.progress
        if every and self.snapshots.enabled and self.dist.is_main and p.step % every == 0:
            self.snapshots.add(p.step, self.checkpoint(p.last_record))

    def _average_snapshots(self) -> None:
        """Average the kept snapshots; the average becomes best.pt if it validates better.
        last.pt keeps the trained weights either way."""
        averaged = self.snapshots.average()
        if averaged is None:
            return
        state, n = averaged
        best = self.progress.best_valid_loss
        with trying_weights(self.model, state):
            valid = loss_result(*self._valid_nll(alone=True))
            log.info(
                "average of the last %d snapshots: Val. Loss %.3f | Val. PPL %.3f (best single: %.3f)",
                n,
                valid.loss,
                valid.ppl,
                best,
            )
            if valid.loss < best:
                record = dataclasses.replace(
                    self.progress.history[-1],
                    valid_loss=round(valid.loss, 5),
                    valid_ppl=round(valid.ppl, 4),
                    averaged_snapshots=n,
                )
                self.checkpoint(record).write(self.run_dir.best)
                self.progress.best_valid_loss = valid.loss
