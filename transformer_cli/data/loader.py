"""The training batches: planned from the lengths, made in DataLoader worker processes.

`TrainingData` is what the training loop iterates. For an epoch it plans the batches from the
memory-mapped split's lengths alone (`plan_batches`: a function of (seed, epoch)), takes this
rank's share, and gives them in optimizer steps of `train.accumulate` batches. The batches are
read, augmented (data/augment.py) and padded by `train.data_workers` worker processes, a few
batches ahead of the training step and (on a GPU) in pinned memory. What a batch holds depends
on (seed, epoch, batch number) only, so the number of workers and restarts change nothing.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Generator, Iterator
from typing import Any, cast

import numpy as np
import torch

from ..config import Config
from ..errors import TfmError, first_line
from ..host.machine import available_cpus
from ..host.threads import start_count
from .augment import Augmentation
from .batching import Batch, batch_seed, collate, collate_pairs, epoch_seed, plan_batches, within_budget
from .parallel import as_helper_process, stop_signals_held
from .shards import TrainingSplit

PREFETCH_BATCHES = 4  # per worker
# What a DataLoader worker's death raises in the training process (`worker_failure` decides).
WORKER_LOSS = (RuntimeError, ConnectionError, EOFError)
MICRO_BATCH_SLACK = 1.25  # an augmented batch may exceed its token budget by this much, whole


class EpochBatches(torch.utils.data.Dataset[list[Batch]]):
    """Batches of one epoch by position: item k is batch `numbers[k]` of the epoch's plan, as
    one or more padded micro-batches (see `__getitem__`)."""

    def __init__(
        self,
        split: TrainingSplit,
        batches: list[np.ndarray],
        numbers: list[int],
        augmentation: Augmentation,
        seed: int,
        epoch: int,
        max_positions: int,
        batch_tokens: int | None,
    ):
        self.split, self.batches, self.numbers = split, batches, numbers
        self.augmentation, self.seed, self.epoch, self.max_positions = augmentation, seed, epoch, max_positions
        self.batch_tokens = batch_tokens
        self.framing = augmentation.tokenizers.framing

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, k: int) -> list[Batch]:
        """The batch, padded. An augmented batch was planned from the preprocessed lengths;
        when its pairs grew past `MICRO_BATCH_SLACK` times the token budget (typically one
        source put in capitals, which BPE splits into two or three times the pieces), it
        comes as micro-batches that each fit, which the step accumulates: the same gradient,
        without padding every sentence to the widest."""
        indices = self.batches[k]
        if not self.augmentation.active:
            return [collate(self.split, indices, self.framing, self.max_positions)]
        seed = batch_seed(self.seed, self.epoch, self.numbers[k])
        pairs = self.augmentation.pairs(self.split, indices, seed)
        if self.batch_tokens is None:
            return [collate_pairs(pairs, self.framing, self.max_positions)]
        parts = within_budget(pairs, int(MICRO_BATCH_SLACK * self.batch_tokens), self.max_positions)
        return [collate_pairs([pairs[i] for i in part], self.framing, self.max_positions) for part in parts]


def _in_worker(_: int) -> None:
    """A DataLoader worker leaves stop signals to the trainer and dies with it, and encodes
    with one thread: the workers are the parallelism. A bus error (a shard cut short under
    its memory map) kills it without torch's own message: the trainer names the shard."""
    as_helper_process()
    signal.signal(signal.SIGBUS, signal.SIG_DFL)
    info = torch.utils.data.get_worker_info()
    assert info is not None  # called by DataLoader in a worker
    dataset = cast(EpochBatches, info.dataset)
    for tokenizer in (dataset.augmentation.tokenizers.src, dataset.augmentation.tokenizers.tgt):
        tokenizer.set_threads(1)


def default_workers(threads: int) -> int:
    """`train.data_workers` when unset: one worker per CPU the training threads leave free,
    at least one, at most four."""
    return max(1, min(4, available_cpus() - threads))


class TrainingData:
    """This rank's training batches, epoch by epoch (see the module docstring)."""

    def __init__(
        self,
        cfg: Config,
        split: TrainingSplit,
        augmentation: Augmentation,
        rank: int = 0,
        world_size: int = 1,
        pin_memory: bool = False,
    ):
        self.cfg, self.split, self.augmentation = cfg, split, augmentation
        self.rank, self.world_size, self.pin_memory = rank, world_size, pin_memory
        tc = cfg.train
        self.workers = tc.data_workers if tc.data_workers is not None else default_workers(start_count(tc.threads))
        # which pairs of the split an epoch draws from (training/replay.py's night), by (seed, epoch);
        # None: all of them
        self.selection: Callable[[int, int], np.ndarray] | None = None
        self._plan: tuple[int, list[np.ndarray], list[int]] | None = None  # the last epoch planned
        self._ahead: tuple[int, threading.Thread, list[Any]] | None = None  # the next, being planned

    def _rank_plan(self, epoch: int) -> tuple[list[np.ndarray], list[int]]:
        """This rank's batches of `epoch` and their numbers in the epoch's whole plan."""
        if self._plan is None or self._plan[0] != epoch:
            ahead, self._ahead = self._ahead, None
            plan: list[Any] = []
            if ahead is not None and ahead[0] == epoch:
                ahead[1].join()
                plan = ahead[2]  # empty if the thread failed: planned again here
            self._plan = epoch, *(plan or self._make_plan(epoch))
        return self._plan[1], self._plan[2]

    def _make_plan(self, epoch: int) -> tuple[list[np.ndarray], list[int]]:
        tc = self.cfg.train
        chosen = None if self.selection is None else self.selection(tc.seed, epoch)  # [pairs of the epoch]
        src, tgt = self.split.src_lengths, self.split.tgt_lengths
        batches = plan_batches(
            src if chosen is None else src[chosen],
            tgt if chosen is None else tgt[chosen],
            batch_size=tc.batch_size,
            batch_tokens=tc.batch_tokens,
            shuffle=True,
            seed=tc.seed,
            epoch=epoch,
        )
        if chosen is not None:  # positions in the chosen pairs -> pairs of the split
            batches = [chosen[b] for b in batches]
        world = self.world_size
        numbers = list(range(len(batches) // world * world))[self.rank :: world]
        return [batches[i] for i in numbers], numbers

    def _plan_ahead(self, epoch: int) -> None:
        """Plan `epoch` (unless past train.epochs) in a background thread while the one before
        it trains: planning a corpus of millions of pairs takes seconds (4 s for 4.5M pairs,
        one Python step per pair), which would otherwise be a pause at every epoch boundary."""
        if epoch >= self.cfg.train.epochs or (self._ahead is not None and self._ahead[0] == epoch):
            return
        result: list[Any] = []
        # Not a daemon: torch work cut off by the interpreter's exit aborts the process; an exit
        # meanwhile waits for the plan (seconds at most) instead.
        thread = threading.Thread(target=lambda: result.extend(self._make_plan(epoch)), name=f"plan-epoch-{epoch}")
        thread.start()
        self._ahead = epoch, thread, result

    def steps(self, epoch: int) -> int:
        """Optimizer steps of this rank in `epoch` (the last may hold fewer batches)."""
        accumulate = self.cfg.train.accumulate
        return -(-len(self._rank_plan(epoch)[0]) // accumulate)

    def step_indices(self, epoch: int, step: int) -> list[np.ndarray]:
        """The pair indices of each batch of one optimizer step."""
        accumulate = self.cfg.train.accumulate
        return self._rank_plan(epoch)[0][step * accumulate : (step + 1) * accumulate]

    def steps_from(self, epoch: int, first: int) -> Generator[list[Batch], None, None]:
        """The batches of each optimizer step of `epoch` from step `first` on (an augmented
        batch may come as several micro-batches: see `EpochBatches`)."""
        batches, numbers = self._rank_plan(epoch)
        accumulate = self.cfg.train.accumulate
        start = first * accumulate
        dataset = EpochBatches(
            self.split,
            batches[start:],
            numbers[start:],
            self.augmentation,
            self.cfg.train.seed,
            epoch,
            self.cfg.model.max_len,
            self.cfg.train.batch_tokens if not self.cfg.train.batch_size else None,
        )
        # A generator of its own: a DataLoader draws its workers' base seed from it, which would
        # otherwise come from (and move) the global RNG that dropout uses, and a resumed run
        # (which starts a loader at another point) would no longer equal an uninterrupted one.
        private = torch.Generator().manual_seed(epoch_seed(self.cfg.train.seed, epoch))
        loader = torch.utils.data.DataLoader(
            dataset,
            batch_size=None,
            shuffle=False,
            num_workers=self.workers,
            pin_memory=self.pin_memory,
            worker_init_fn=_in_worker,
            prefetch_factor=PREFETCH_BATCHES if self.workers else None,
            generator=private,
        )
        group: list[Batch] = []
        planned = 0
        with stop_signals_held():
            worker_batches = iter(loader)  # the workers start here
        # Only now: a fork while another thread holds a lock (numpy's, torch's, malloc's) can
        # leave the child deadlocked before it runs `_in_worker`: no batches, and a worker
        # that outlives a killed parent, holding its sockets open (a DDP peer then hangs).
        self._plan_ahead(epoch + 1)
        try:
            for k, micro_batches in enumerate(worker_batches):
                self._check_ids(micro_batches, batches[start + k])
                group += micro_batches
                planned += 1
                if planned == accumulate:
                    yield group
                    group, planned = [], 0
        except WORKER_LOSS as e:
            failure = self.worker_failure(e)
            if failure is None:
                raise
            raise failure from None
        finally:
            _shut_down(worker_batches)
        if group:
            yield group

    def _check_ids(self, batches: list[Batch], indices: np.ndarray) -> None:
        """Ids past the vocabularies mean a shard changed after preprocessing (same size, other
        bytes): stop before a step trains on them, naming the files."""
        sizes = (self.augmentation.tokenizers.src.vocab_size, self.augmentation.tokenizers.tgt.vocab_size)
        for b in batches:
            if int(b.src.max()) >= sizes[0] or int(b.tgt_out.max()) >= sizes[1]:
                files = ", ".join(map(str, self.split.shard_paths(indices)))
                raise TfmError(
                    f"{files}: token ids past the vocabulary: a preprocessed shard changed "
                    f"after it was written; run `{self._verify_command()}` (nothing was "
                    "trained on them)"
                )

    def _verify_command(self) -> str:
        """The `tfm preprocess --verify` that repairs the data, with the config as it was given."""
        from ..config_loading import command_for

        return command_for(self.cfg, "preprocess", "--verify")

    def worker_failure(self, e: BaseException) -> TfmError | None:
        """The one-line error for a DataLoader worker that died (killed, or a bus error reading a
        shard cut short), or None when `e` is not that. torch raises it wherever the training
        process is when it notices (its SIGCHLD handler), often inside a step: the loop asks too.
        Besides torch's RuntimeError, the pipe to a worker killed mid-batch ends in an EOFError or
        a ConnectionError while a batch's tensors are received (seen once in thirty-odd kills)."""
        if not isinstance(e, WORKER_LOSS) or (isinstance(e, RuntimeError) and "DataLoader worker" not in str(e)):
            return None
        damage = self.split.damage()
        if damage is not None:
            where = getattr(damage, "filename", None) or "a preprocessed shard"
            return TfmError(
                f"{where} changed while training read it ({first_line(damage)}): run "
                f"`{self._verify_command()}`; the last saved state is kept"
            )
        return TfmError(
            f"a data worker process died ({first_line(e)}); the last saved state is "
            "kept: run the same command to resume"
        )


def _shut_down(batches: Iterator[list[Batch]]) -> None:
    """Stop a DataLoader iterator's workers now, not when it is collected (after a worker died,
    torch would print its own traceback then)."""
    shutdown = getattr(batches, "_shutdown_workers", None)
    if shutdown is not None:
        try:
            shutdown()
        except Exception:  # noqa: BLE001 - a dead worker's queue: nothing more to stop
            pass
