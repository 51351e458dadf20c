"""The training loop: steps, validation, best/last checkpoints, early stopping, resume.

Everything that decides what happens next lives in `Progress`, which is saved in `last.pt`
together with the model, optimizer, schedule and RNG states. The batch plan of an epoch is a
function of (seed, epoch), so a resumed run replays exactly the batches it had not done yet
and, on the same machine, reproduces the uninterrupted run's numbers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from typing import Any, Literal

import torch
import torch.distributed as dist

from ..checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from ..config import Config, TrainConfig
from ..data.batching import collate, plan_batches
from ..data.preprocess import Prepared
from ..data.vocab import PAD
from ..device import autocast, autocast_dtype
from ..errors import StoppedBySignal, TfmError
from ..evaluate import DecodeResult, corpus_nll, loss_result, translate_and_score
from ..inference.translate import Translator
from ..model.transformer import Seq2SeqTransformer
from .averaging import average_state_dicts
from .distributed import DistContext
from ..loss import sequence_loss
from .optim import build_optimizer, build_scheduler
from .run_dir import RunDir
from .signals import GracefulStop, StopRequested

log = logging.getLogger("tfm")

# Settings that may change between sessions of one run without starting it over (schema metadata).
RESUMABLE_CHANGES = {f.name for f in fields(TrainConfig) if f.metadata.get("resumable")}
VALID_BATCH_TOKENS = 8000


def run_identity(cfg: Config, data_fingerprint: str) -> str:
    """What makes two sessions the same run: the data, tokenizer, model and optimization."""
    d = cfg.to_dict()
    train = {k: v for k, v in d["train"].items() if k not in RESUMABLE_CHANGES}
    payload = {"data": data_fingerprint, "tokenizer": d["tokenizer"], "model": d["model"], "train": train}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


@dataclass
class Progress:
    """Where a run stands. Saved in last.pt; plain data only."""

    step: int = 0  # optimizer steps done
    epoch: int = 0  # epochs completed
    batch_in_epoch: int = 0  # optimizer steps done in the current epoch
    pending_validation: Literal["", "epoch", "step"] = ""  # which validation is due, if any
    best_valid_loss: float = math.inf
    best_step: int = -1
    bad_validations: int = 0  # validations in a row without improvement
    finished: bool = False
    stop_reason: str = ""
    pending_average: bool = False  # finished, checkpoint averaging still to do
    elapsed_s: float = 0.0  # wall time over all sessions
    epoch_nll: float = 0.0  # training NLL sum of the current epoch so far
    epoch_tokens: int = 0
    epoch_train_s: float = 0.0
    history: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Progress":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


def default_threads() -> int:
    """Intra-op threads when train.threads is unset: the CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


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
        self.model = Seq2SeqTransformer(cfg.model, tokenizers.src.vocab_size,
                                        tokenizers.tgt.vocab_size).to(device)
        self.optimizer = build_optimizer(self.model, tc, device)
        self.scheduler = build_scheduler(self.optimizer, tc)
        self.train_split, self.valid_split = prepared.split("train"), prepared.split("val")
        self.identity = run_identity(cfg, prepared.manifest["fingerprint"])
        # Words (+1 for the sentence end) in the raw validation references: per-word perplexity
        # compares models whose tokenizers differ (per-token perplexity does not).
        self.valid_words = sum(len(x.split()) + 1 for x in prepared.text("val", cfg.data.tgt_lang))
        self.progress = Progress()
        self.net: torch.nn.Module = self.model
        if dist_ctx.enabled:
            self.net = torch.nn.parallel.DistributedDataParallel(
                self.model, device_ids=[device.index] if device.type == "cuda" else None)
        if tc.compile:
            self.net = torch.compile(self.net, dynamic=True)
        self._epoch_nll = torch.zeros((), device=device)
        self._session_mark = time.monotonic()
        self._last_save = time.monotonic()
        self._tensorboard = None

    # ------------------------------------------------------------------ state
    def _rng_state(self) -> list[dict[str, Any]]:
        state = {"cpu": torch.get_rng_state()}
        if self.device.type == "cuda":
            state["cuda"] = torch.cuda.get_rng_state(self.device)
        if not self.dist.enabled:
            return [state]
        gathered: list[Any] = [None] * self.dist.world_size
        dist.all_gather_object(gathered, state)
        return gathered

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
        rng = self._rng_state()
        if self.dist.is_main:
            latest = self.progress.history[-1] if self.progress.history else {}
            payload = self._model_payload(latest)
            payload["train_state"] = {"progress": asdict(self.progress),
                                      "optimizer": self.optimizer.state_dict(),
                                      "scheduler": self.scheduler.state_dict(), "rng": rng}
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
        rng = state["rng"][self.dist.rank] if self.dist.rank < len(state["rng"]) else state["rng"][0]
        torch.set_rng_state(rng["cpu"])
        if "cuda" in rng and self.device.type == "cuda":
            torch.cuda.set_rng_state(rng["cuda"], self.device)

    def extend_if_asked(self) -> bool:
        """A finished run continues when epochs/max_steps were raised; True if it will train."""
        p, tc = self.progress, self.cfg.train
        if not p.finished or p.pending_average:
            return True
        more_epochs = p.stop_reason == "epochs" and p.epoch < tc.epochs
        more_steps = p.stop_reason == "max_steps" and (tc.max_steps is None or p.step < tc.max_steps)
        if more_epochs or more_steps:
            p.finished, p.stop_reason = False, ""
            return True
        return False

    # ------------------------------------------------------------------ the loop
    def run(self) -> None:
        """Train until the epochs, max_steps or patience say stop; validate and save on the way."""
        try:
            while not self.progress.finished:
                if self.progress.pending_validation:
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
            if self._tensorboard is not None:
                self._tensorboard.close()

    def _check_stop(self, save_due: bool = False) -> bool:
        """Raise StopRequested if any rank got a stop signal; return whether to save now.

        Under DDP both decisions are agreed in one all-reduce (stop: any rank; save: rank 0's
        clock), so every rank takes the same collective path.
        """
        requested = self.stop.signum is not None
        if self.dist.enabled:
            flags = torch.tensor([float(requested), float(save_due and self.dist.is_main)],
                                 device=self.device)
            requested, save_due = (bool(x > 0) for x in self.dist.all_reduce_sum(flags))
        if requested:
            raise StopRequested(self.stop.signum or 15)
        return save_due

    def epoch_groups(self, epoch: int) -> list[list[list[int]]]:
        """This rank's optimizer steps for `epoch`: lists of `accumulate` batches."""
        tc = self.cfg.train
        batches = plan_batches(self.train_split.src_lengths, self.train_split.tgt_lengths,
                               batch_size=tc.batch_size, batch_tokens=tc.batch_tokens, shuffle=True,
                               seed=tc.seed, epoch=epoch)
        world = self.dist.world_size
        batches = batches[: len(batches) // world * world][self.dist.rank :: world]
        return [batches[i : i + tc.accumulate] for i in range(0, len(batches), tc.accumulate)]

    def train_step(self, group: list[list[int]]) -> int:
        """One optimizer step over a group of batches; returns its target-token count."""
        pin = self.device.type == "cuda"
        batches = [collate(self.train_split, idx, self.cfg.model.max_len, pin).to(self.device)
                   for idx in group]
        n_tokens = sum(b.n_tokens for b in batches)
        smoothing = self.cfg.train.label_smoothing
        for i, b in enumerate(batches):
            last = i == len(batches) - 1
            no_sync = self.net.no_sync() if self.dist.enabled and not last else contextlib.nullcontext()
            with no_sync:
                with autocast(self.device, self.dtype):
                    logits = self.net(b.src, b.tgt_in)
                loss, nll = sequence_loss(logits, b.tgt_out, PAD, smoothing)
                loss = loss / n_tokens
                (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
            self._epoch_nll += nll
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
        return n_tokens

    def _checkpoint_due(self) -> bool:
        tc = self.cfg.train
        by_steps = tc.checkpoint_every_steps and self.progress.step % tc.checkpoint_every_steps == 0
        by_time = (tc.checkpoint_every_minutes
                   and time.monotonic() - self._last_save >= 60 * tc.checkpoint_every_minutes)
        return bool(by_steps or by_time)

    def _progress_bar(self, total: int, initial: int):
        from tqdm import tqdm

        return tqdm(total=total, initial=initial, desc=f"epoch {self.progress.epoch + 1}",
                    unit="step", leave=False, dynamic_ncols=True,
                    disable=not (self.show_progress and self.dist.is_main))

    def _train_until_validation(self) -> None:
        p, tc = self.progress, self.cfg.train
        groups = self.epoch_groups(p.epoch)
        self.net.train()
        with self._progress_bar(len(groups), p.batch_in_epoch) as bar:
            for g in range(p.batch_in_epoch, len(groups)):
                started = time.perf_counter()
                p.epoch_tokens += self.train_step(groups[g])
                p.epoch_train_s += time.perf_counter() - started
                p.step += 1
                p.batch_in_epoch = g + 1
                bar.update()
                if bar.n % 20 == 0 and not bar.disable:
                    loss = float(self._epoch_nll) / max(1, p.epoch_tokens)
                    bar.set_postfix(loss=f"{loss:.3f}", ppl=f"{math.exp(min(loss, 50)):.1f}",
                                    tok_s=f"{p.epoch_tokens / max(p.epoch_train_s, 1e-9):.0f}")
                save_due = self._check_stop(self._checkpoint_due())
                if g + 1 == len(groups):
                    break
                if (tc.max_steps and p.step >= tc.max_steps) or (tc.valid_every and p.step % tc.valid_every == 0):
                    p.pending_validation = "step"
                    return
                if save_due:
                    self.save_last()
        p.epoch += 1
        p.batch_in_epoch = 0
        p.pending_validation = "epoch"

    # ------------------------------------------------------------------ validation
    def _validate(self) -> None:
        p, tc = self.progress, self.cfg.train
        end_of_epoch = p.pending_validation == "epoch"
        # One process stops mid-validation on a signal; under DDP ranks may hold different
        # numbers of validation batches, so the (collective) stop check waits for the next step.
        check_stop = None if self.dist.enabled else self._check_stop
        nll, tokens = corpus_nll(self.model, self.valid_split, self.device, self.dtype,
                                 VALID_BATCH_TOKENS, self.cfg.model.max_len,
                                 (self.dist.rank, self.dist.world_size), check_stop)
        valid = loss_result(self.dist.all_reduce_sum(nll), self.dist.all_reduce_sum(tokens))
        train_nll = float(self.dist.all_reduce_sum(self._epoch_nll.clone()))
        train_tokens = int(self.dist.all_reduce_sum(torch.tensor(p.epoch_tokens, device=self.device)))
        train = loss_result(torch.tensor(train_nll), torch.tensor(train_tokens))
        self._stop_if_diverged(train.loss, valid.loss)
        self._tick()
        record = {
            "epoch": p.epoch if end_of_epoch else p.epoch + 1, "end_of_epoch": end_of_epoch,
            "step": p.step, "train_loss": round(train.loss, 5), "train_ppl": round(train.ppl, 4),
            "valid_loss": round(valid.loss, 5), "valid_ppl": round(valid.ppl, 4),
            "valid_word_ppl": round(math.exp(min(50.0, valid.loss * valid.n_tokens / self.valid_words)), 4),
            "lr": self.scheduler.get_last_lr()[0],
            "tokens_per_s": round(train_tokens / max(p.epoch_train_s, 1e-9), 1),  # all ranks
            "elapsed_s": round(p.elapsed_s, 2),
        }
        if tc.valid_bleu and self.dist.is_main:
            result = self._valid_bleu(check_stop)
            record["valid_bleu"], record["valid_chrf"] = result.scores.bleu, result.scores.chrf
            record["valid_decode"] = self._valid_decode_label()
        improved = valid.loss < p.best_valid_loss
        if improved:
            p.best_valid_loss, p.best_step, p.bad_validations = valid.loss, p.step, 0
        else:
            p.bad_validations += 1
        p.history.append(record)
        if self.dist.is_main:
            if improved:
                save_checkpoint(self.run_dir.best, self._model_payload(record))
            if end_of_epoch and tc.average_last > 1:
                self._save_snapshot(record)
            self._log_record(record, improved)
        if end_of_epoch:
            self._epoch_nll.zero_()
            p.epoch_tokens, p.epoch_train_s = 0, 0.0
        p.pending_validation = ""
        if end_of_epoch and p.epoch >= tc.epochs:
            p.finished, p.stop_reason = True, "epochs"
        elif tc.max_steps and p.step >= tc.max_steps:
            p.finished, p.stop_reason = True, "max_steps"
        elif tc.patience and p.bad_validations >= tc.patience:
            p.finished, p.stop_reason = True, "early_stopping"
            log.info("early stopping: no improvement in %d validations", p.bad_validations)
        p.pending_average = p.finished and tc.average_last > 1
        self.save_last()

    def _stop_if_diverged(self, train_loss: float, valid_loss: float) -> None:
        """A non-finite loss ends the run with an error: nothing is saved or promoted from it."""
        if math.isfinite(train_loss) and math.isfinite(valid_loss):
            return
        raise TfmError(f"training diverged: train loss {train_loss}, validation loss {valid_loss} "
                       f"at step {self.progress.step} (train.lr={self.cfg.train.lr}); nothing was "
                       "saved or promoted from it: lower train.lr (or set train.clip_norm) and run "
                       "again")

    def _valid_decode_settings(self):
        """train.valid_decode: greedy, or beam search with the decode section's beam size."""
        d = self.cfg.decode
        beam = d.beam_size if self.cfg.train.valid_decode == "beam" else 1
        return dataclasses.replace(d, beam_size=beam, n_best=1)

    def _valid_decode_label(self) -> str:
        beam = self._valid_decode_settings().beam_size
        return "greedy" if beam == 1 else f"beam {beam}"

    def _valid_bleu(self, check_stop: Callable[[], object] | None) -> DecodeResult:
        """Validation BLEU/chrF with train.valid_decode; the model's train/eval mode is kept."""
        translator = Translator(self.model, self.prepared.tokenizers, self.device,
                                self._valid_decode_settings(), self.dtype)
        lang_src, lang_tgt = self.cfg.data.src_lang, self.cfg.data.tgt_lang
        sources = self.prepared.text("val", lang_src)
        log.info("validation BLEU: translating %d sentences (%s)", len(sources), self._valid_decode_label())
        was_training = self.model.training
        try:
            return translate_and_score(translator, sources, self.prepared.text("val", lang_tgt),
                                       check_stop)
        finally:
            self.model.train(was_training)

    def _log_record(self, r: dict[str, Any], improved: bool) -> None:
        minutes, seconds = divmod(int(r["elapsed_s"]), 60)
        head = f"Epoch: {r['epoch']:02}" if r["end_of_epoch"] else f"Step: {r['step']}"
        bleu = (f" | Val. BLEU ({r.get('valid_decode', 'greedy')}): {r['valid_bleu']:.2f}"
                if "valid_bleu" in r else "")
        log.info("%s | Time: %dm %02ds | Train Loss: %.3f | Train PPL: %7.3f | Val. Loss: %.3f | "
                 "Val. PPL: %7.3f%s | %.0f tok/s%s", head, minutes, seconds, r["train_loss"],
                 r["train_ppl"], r["valid_loss"], r["valid_ppl"], bleu, r["tokens_per_s"],
                 " *" if improved else "")
        if self.cfg.train.tensorboard:
            self._tensorboard_log(r)

    def _tensorboard_log(self, r: dict[str, Any]) -> None:
        if self._tensorboard is None:
            from torch.utils.tensorboard import SummaryWriter

            self._tensorboard = SummaryWriter(str(self.run_dir.path / "tensorboard"))
        for key in ("train_loss", "train_ppl", "valid_loss", "valid_ppl", "lr", "tokens_per_s",
                    "valid_bleu"):
            if key in r:
                self._tensorboard.add_scalar(key, r[key], r["step"])

    # ------------------------------------------------------------------ averaging
    def _save_snapshot(self, record: dict[str, Any]) -> None:
        """Keep the weights of the last `average_last` epochs for checkpoint averaging."""
        folder = self.run_dir.snapshots
        folder.mkdir(exist_ok=True)
        save_checkpoint(folder / f"epoch_{record['epoch']:03}.pt", self._model_payload(record))
        for old in sorted(folder.glob("epoch_*.pt"))[: -self.cfg.train.average_last]:
            old.unlink()

    def _average_snapshots(self) -> None:
        """Average the kept epoch weights; the average becomes best.pt if it validates better."""
        paths = sorted(self.run_dir.snapshots.glob("epoch_*.pt"))
        if len(paths) < 2:
            return
        try:
            states = [load_checkpoint(p)["state_dict"] for p in paths]
        except CheckpointError as e:
            log.warning("checkpoint averaging skipped: %s", e)
            return
        trained = {k: v.clone() for k, v in self.model.state_dict().items()}
        self.model.load_state_dict(average_state_dicts(states))
        check_stop = None if self.dist.enabled else self._check_stop
        try:
            valid = loss_result(*corpus_nll(self.model, self.valid_split, self.device, self.dtype,
                                            VALID_BATCH_TOKENS, self.cfg.model.max_len,
                                            check_stop=check_stop))
        except StopRequested:
            self.model.load_state_dict(trained)  # last.pt must hold the trained weights
            raise
        log.info("average of the last %d epochs: Val. Loss %.3f | Val. PPL %.3f (best single: %.3f)",
                 len(paths), valid.loss, valid.ppl, self.progress.best_valid_loss)
        if valid.loss < self.progress.best_valid_loss:
            record = {**self.progress.history[-1], "valid_loss": round(valid.loss, 5),
                      "valid_ppl": round(valid.ppl, 4), "averaged_epochs": len(paths)}
            save_checkpoint(self.run_dir.best, self._model_payload(record))
            self.progress.best_valid_loss = valid.loss
        self.model.load_state_dict(trained)  # last.pt keeps the trained weights
