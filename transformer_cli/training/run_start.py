"""What a `tfm train` session trains: the data prepared for it, the run's identity, the model
it starts from and, for the nightly run (train.init_from: published), train.retrain's decision.

A decision needs the corpus encoded with the parent's tokenizers (for their <unk> rate), and a
decision to retrain from scratch then needs it encoded with tokenizers fitted on it: a night
that decides so prepares the data twice, as does one that continues with a grown vocabulary
(train.retrain.grow_vocabulary: training/vocabulary_growth.py), whose second preparation encodes
only the pairs that hold an added piece (data/grown_folder.py). A later session of the same
run (retrain.json holds its decision with its identity) prepares at once what the decision
needs, and takes the decision from there: a run retraining from scratch resumes from scratch, with its own
tokenizers, whatever the thresholds say by then. A run with last.pt but no decision (begun
by an earlier tfm, or under policy: fixed) goes on as it began. A decision for scratch under
train.retrain.scratch: background continues the night instead (retrain_policy.defer), and the
run from scratch behind the nights (training/scratch_run.py) prepares its data once, mixing in
the nightly config's parts, and takes it as it is in its later sessions.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass

from ..checkpoint import Checkpoint, CheckpointError
from ..config import Config
from ..data import folder_lock
from ..data.freshness import GivenTokenizers
from ..data.prepared import Prepared, load_prepared
from ..errors import TfmError, UsageError
from .parent import PUBLISHED, Parent, lineage
from .replay import seen_of
from .retrain_policy import Decision, decide, defer, facts_of, first_run, read_stored, store
from .run_data import data_identity, prepare_run_data
from .run_dir import RunDir, run_identity
from .scratch_run import ScratchRun, status
from .vocabulary_growth import grow

log = logging.getLogger("tfm")


@dataclass(frozen=True)
class RunStart:
    prepared: Prepared  # held for reading (folder_lock) until the session releases it
    identity: str
    parent: Parent | None  # the model the run starts from (None: from scratch)
    decision: Decision | None  # train.retrain's (None: none taken)
    fresh: bool = False  # taken in this session (else read from retrain.json)


def start_run(
    cfg: Config,
    run: RunDir,
    parent: Parent | None,
    check_stop: Callable[[], None],
    restart: bool,
    scratch: ScratchRun | None = None,
) -> RunStart:
    """The first rank's: prepare the data (fitting tokenizers or with `parent`'s) and take or
    read train.retrain's decision. `restart`: decide again (the run starts over anyway).
    `scratch`: a session of the run from scratch behind the nights."""
    nightly = cfg.train.init_from is not None and (parent is None or parent.spec == PUBLISHED)
    stored = read_stored(run) if nightly and not restart else None
    digest = parent.checkpoint.digest if parent is not None else None
    fitted = parent is None or (stored is not None and stored.decision.scratch and stored.parent_sha256 == digest)
    data = _Data(cfg, check_stop, scratch, None if scratch is None or restart else run)
    prepared = data.prepare(None if fitted or parent is None else parent.tokenizers(run))
    try:
        identity = _identity(cfg, prepared, parent)
        if stored is not None and stored.run_identity == identity:
            return _started(prepared, identity, parent, stored.decision)
        if not nightly:
            return RunStart(prepared, identity, parent, None)
        adaptive = cfg.train.retrain.policy == "adaptive"
        if parent is None:  # nothing published yet: from scratch (resolve_parent said so)
            decision = first_run(_pairs(prepared), cfg.train.epochs) if adaptive else None
            return _decided(run, prepared, identity, None, decision)
        if fitted:  # another run's decision, on this parent: encode with its tokenizers to decide
            prepared = data.again(parent.tokenizers(run))
            identity = _identity(cfg, prepared, parent)
        if not adaptive:
            return _decided(run, prepared, identity, parent, None)
        begun = None if restart else begun_without_decision(run, identity)
        if begun is not None:
            if not begun:  # (a finished one is a no-op, as any)
                log.info("continued training: this run began without train.retrain's decision: it goes on as it began")
            return _decided(run, prepared, identity, parent, None)
        base = cfg.train.continued.epochs or cfg.train.epochs
        facts = facts_of(parent.checkpoint, prepared.manifest)
        if cfg.train.retrain.night == "replay":
            facts = dataclasses.replace(facts, parent_seen=seen_of(parent.path, parent.checkpoint.training) is not None)
        decision = decide(cfg.train.retrain, facts, base, cfg.train.epochs)
        if decision.scratch and cfg.train.retrain.scratch == "background":
            decision = defer(cfg.train.retrain, decision, base, status(cfg))
        log.info("%s", decision.text)
        if decision.scratch:
            prepared = data.again(None)
            identity = _identity(cfg, prepared, parent)
        elif cfg.train.retrain.grow_vocabulary:
            grown = grow(cfg, run, parent.pair, parent.checkpoint.digest, parent.tokenizer_settings(), prepared)
            if grown.vocabulary_digest() != prepared.tokenizers.vocabulary_digest():
                prepared = data.again(parent.tokenizers(run))
                identity = _identity(cfg, prepared, parent)
        return _decided(run, prepared, identity, parent, decision)
    except BaseException:
        data.release()
        raise


def start_other_rank(cfg: Config, run: RunDir, parent: Parent | None) -> RunStart:
    """Another rank's, once the first has prepared the data and stored its decision."""
    prepared = load_prepared(cfg, hold=True)
    identity = _identity(cfg, prepared, parent)
    stored = read_stored(run)
    decision = stored.decision if stored is not None and stored.run_identity == identity else None
    return _started(prepared, identity, parent, decision)


def _started(
    prepared: Prepared, identity: str, parent: Parent | None, decision: Decision | None, fresh: bool = False
) -> RunStart:
    """The start of a run by `decision`: from scratch, or from `parent`."""
    return RunStart(prepared, identity, None if decision is not None and decision.scratch else parent, decision, fresh)


def _decided(
    run: RunDir, prepared: Prepared, identity: str, parent: Parent | None, decision: Decision | None
) -> RunStart:
    """Store `decision` for the run's later sessions (none: a stored one of another run goes)."""
    if decision is None:
        run.retrain.unlink(missing_ok=True)
    else:
        store(run, identity, parent.checkpoint.digest if parent is not None else None, decision)
    return _started(prepared, identity, parent, decision, fresh=True)


class _Data:
    """The data folder prepared and held for reading (folder_lock), once or again; for a run
    from scratch behind the nights, with the nightly config's parts, and as it is once the run
    has begun (`begun`: its run folder, None when it starts over)."""

    def __init__(
        self,
        cfg: Config,
        check_stop: Callable[[], None],
        scratch: ScratchRun | None = None,
        begun: RunDir | None = None,
    ):
        self.cfg, self.check_stop, self.held = cfg, check_stop, False
        self.parts_of = scratch.nightly if scratch is not None else None
        self.begun = begun

    def prepare(self, given: GivenTokenizers | None) -> Prepared:
        prepared = self._as_begun()
        if prepared is None:
            prepared, _ = prepare_run_data(self.cfg, self.check_stop, given, hold=True, parts_of=self.parts_of)
        self.held = True
        return prepared

    def _as_begun(self) -> Prepared | None:
        """A begun run from scratch's data folder as it is (None: not such a run, or none is whole)."""
        if self.begun is None or not (self.begun.last.is_file() or self.begun.last_prev.is_file()):
            return None
        try:
            prepared = load_prepared(self.cfg, hold=True)
        except TfmError as e:
            log.warning("warning: %s: preparing the data again", e)
            return None
        log.info("the data as this run from scratch began with: %s", prepared.folder)
        return prepared

    def again(self, given: GivenTokenizers | None) -> Prepared:
        """Prepared once more, with other tokenizers (the earlier hold ends first)."""
        self.release()
        return self.prepare(given)

    def release(self) -> None:
        if self.held:
            folder_lock.release(self.cfg.data_dir)
            self.held = False


def _identity(cfg: Config, prepared: Prepared, parent: Parent | None) -> str:
    return run_identity(
        cfg, data_identity(cfg, prepared), lineage(cfg, prepared.tokenizers.vocabulary_digest(), parent)
    )


def _pairs(prepared: Prepared) -> int:
    return prepared.manifest.training_pairs


def begun_without_decision(run: RunDir, identity: str) -> bool | None:
    """Whether this run, which holds no stored decision (begun by an earlier tfm, or under
    policy: fixed), has finished; None: the run folder's newest readable state is of no run
    of this identity."""
    for path in (run.last, run.last_prev):
        try:
            checkpoint = Checkpoint.read(path)
        except (CheckpointError, UsageError):
            continue
        if checkpoint.run_identity != identity or checkpoint.train_state is None:
            return None
        return bool(checkpoint.train_state.progress.get("finished"))
    return None
