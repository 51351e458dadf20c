"""The retrain from scratch behind the nights (train.retrain.scratch: background): a night whose
decision calls for scratch continues the published model instead (retrain_policy.defer), and
this job trains the model from scratch beside, in `checkpoints/<name>.scratch/`
(training/scratch_run.py), never holding a night up.

`run_scratch` runs after each successful nightly `tfm train` (one crontab line does it all) and
as `tfm train --scratch`:

- a run under way goes on: it resumes from its last.pt, at train.retrain.scratch_priority
  (idle: SCHED_IDLE, niceness 19), for at most train.retrain.scratch_window_minutes of
  training, then saves (as on a stop signal) for the next invocation;
- none under way: one starts when the latest night (its retrain.json) called for scratch and
  is another night than the one the last run from scratch started after; it prepares its
  data once (tokenizers fitted on the corpus as it is now) and trains on that however the
  corpus grows meanwhile: a night after its promotion measures the growth from its pairs and
  may call for the next;
- a run done goes through the same gate as any candidate, against the published model (by
  validation BLEU: its tokenizers are its own; better by train.promote_margin_bleu): promoted,
  it becomes published.pt and counts 0 continued runs, so the count starts again; not, it is
  kept aside (its best.pt stays until the next run from scratch starts) and train.log says so.

One at a time: the job holds its run folder's lock (another exits 75 under `--scratch`, and is
a line in the log after a night); the gate takes the nightly run's lock (while a night holds
it, the promotion waits for the next invocation). Each step is a line in both train.logs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator

from ..config import Config
from ..data import folder_lock
from ..data.prepared import load_prepared
from ..errors import BusyError, StoppedBySignal
from ..fsutil import atomic_write_bytes
from ..host import priority
from ..host.device import resolve_device
from .parent import PUBLISHED
from .promotion import Decision, GateRules, Metric, Outcome, Policy, Scorer, promote
from .replay import SEEN
from .retrain_policy import Stored, read_stored
from .run_dir import RunDir
from .scratch_run import (
    ScratchRun,
    State,
    now,
    read_state,
    scratch_config,
    scratch_dir,
    standing,
    where,
    write_state,
)
from .session import clear_run, run_training
from .signals import WINDOW_ENDED, GracefulStop, StopRequested

log = logging.getLogger("tfm")

WHO = "retrain from scratch behind the nights"


def behind_nights(cfg: Config) -> bool:
    """Whether `cfg`'s nights leave a retrain from scratch that their policy calls for behind them."""
    rules = cfg.train.retrain
    return cfg.train.init_from == PUBLISHED and rules.policy == "adaptive" and rules.scratch == "background"


def run_scratch(cfg: Config, asked: bool = False) -> None:
    """Start, go on with or promote `cfg`'s run from scratch (see the module docstring).
    `asked`: `tfm train --scratch` (a busy run folder is a BusyError, exit 75; nothing to do is
    said); else after a night (both are a line of the log at most)."""
    main, srun = RunDir(cfg.run_dir), scratch_dir(cfg)
    if _work(read_state(srun), _due(main)) is None:
        if asked:
            log.info("%s: none is due or under way (%s)", WHO, srun.path)
        return
    try:
        srun.lock()
    except BusyError as e:
        if asked:
            raise
        _say([main], f"{WHO}: {e}; it goes on there")
        return
    try:
        state = _started(cfg, main, srun)
        if state is None:
            return
        priority.apply(cfg.train.retrain.scratch_priority)
        if _trained(cfg, srun, state) and _relocked(srun):
            _gate(cfg, main, srun, state)
    finally:
        srun.unlock()


def _relocked(srun: RunDir) -> bool:
    """The run folder's lock again (run_training lets it go); False: another job has it now."""
    try:
        srun.lock()
    except BusyError:
        return False
    return True


def _due(main: RunDir) -> Stored | None:
    """The latest night's stored decision when it found a retrain from scratch due."""
    stored = read_stored(main)
    return stored if stored is not None and stored.decision.scratch_due is not None else None


def _work(state: State | None, due: Stored | None) -> str | None:
    """`resume` (one is under way), `start` (a night since the last one started and was judged
    calls for one), or None."""
    if state is not None and state.outcome is None:
        return "resume"
    if due is not None and (state is None or due.run_identity not in (state.night_identity, state.concluded_after)):
        return "start"
    return None


def _started(cfg: Config, main: RunDir, srun: RunDir) -> State | None:
    """The run to train (with the lock held): the one under way, or a new one with the state of
    the last cleared (None: nothing to do, as the lock holder sees it)."""
    state, due = read_state(srun), _due(main)
    work = _work(state, due)
    if work != "start" or due is None:
        return state if work == "resume" else None
    clear_run(srun)
    state = State(str(due.decision.scratch_due), now(), due.run_identity)
    write_state(srun, state)
    rules = cfg.train.retrain
    _say(
        [main, srun],
        f"{WHO}: starting in {srun.path} ({state.why}), on the corpus as it is now, "
        f"{rules.scratch_window_minutes:g} minutes at a time at priority {rules.scratch_priority}",
    )
    return state


def _trained(cfg: Config, srun: RunDir, state: State) -> bool:
    """A window of training; whether the run is done (else where it stands is kept)."""
    scfg, window = scratch_config(cfg), cfg.train.retrain.scratch_window_minutes
    try:
        outcome = run_training(scfg, run=srun, scratch=ScratchRun(cfg, window))
    except StoppedBySignal as e:
        if e.exit_code != 128 + WINDOW_ENDED:
            raise
        stands = standing(srun, scfg)
        write_state(srun, dataclasses.replace(state, stands=stands))
        _say(
            [RunDir(cfg.run_dir), srun],
            f"{WHO}: its window of {window:g} minutes is over{where(scfg, stands)}; saved, it goes on "
            "at the next tfm train (or tfm train --scratch)",
        )
        return False
    return outcome.progress.finished


def _gate(cfg: Config, main: RunDir, srun: RunDir, state: State) -> None:
    """The promotion gate on the finished run's best.pt, against the published model."""
    try:
        main.lock()
    except BusyError as e:
        _say([srun], f"{WHO}: done; its promotion waits for the next invocation ({e})")
        return
    try:
        with _logging_to([main, srun]), GracefulStop("stopping the promotion, keeping nothing half-done") as stop:
            decision = _judged(cfg, main, srun, state, stop)
    except StopRequested as e:
        raise StoppedBySignal(e.signum, f"stopped by signal {e.signum} while judging {srun.best}") from None
    finally:
        main.unlock()
    promoted = _promoted(decision)
    if promoted and cfg.train.retrain.night == "replay":
        _share_seen(srun, main)
    latest = read_stored(main)
    concluded = dataclasses.replace(state, outcome=decision.text, promoted=promoted)
    write_state(srun, dataclasses.replace(concluded, concluded_after=latest.run_identity if latest else None))
    if promoted:
        said = f"{decision.text} -> {main.published}; it counts 0 continued runs ({state.why}, started {state.started})"
    else:
        said = (
            f"kept aside in {srun.best} ({decision.text}); the published model stays, and a new run from "
            "scratch starts when a night on a changed corpus calls for one"
        )
    _say([main, srun], f"{WHO}: {said}")


def _judged(cfg: Config, main: RunDir, srun: RunDir, state: State, stop: GracefulStop) -> Decision:
    """The gate's decision, scored on the validation data the run from scratch prepared."""
    scfg = scratch_config(cfg)
    prepared = load_prepared(scfg, hold=True)
    try:
        device = resolve_device(cfg.train.device)
        scorer = Scorer(prepared, cfg.data.src_lang, cfg.data.tgt_lang, device, cfg.train.precision, stop.check)
        retrain = {
            "decision": "scratch",
            "behind_nights": True,
            "why": state.why,
            "started": state.started,
            "train_pairs": prepared.manifest.training_pairs,
        }
        rules = GateRules.from_config(cfg.train)
        policy, metric = Policy(cfg.train.promote), Metric(cfg.train.promote_metric)
        return promote(main, policy, metric, scorer, rules, retrain, best=srun.best)
    finally:
        folder_lock.release(scfg.data_dir)


def _promoted(decision: Decision) -> bool:
    """Whether the candidate is published now (also when the gate had judged it before)."""
    if decision.outcome is Outcome.ALREADY_DECIDED:
        return decision.text.split(": ", 1)[-1].startswith("promoted")
    return decision.outcome in (Outcome.PROMOTED, Outcome.UNCHANGED)


def _share_seen(srun: RunDir, main: RunDir) -> None:
    """The run's seen sets beside published.pt, for the next replay night (training/replay.py)."""
    target = main.path / SEEN
    for path in sorted((srun.path / SEEN).glob("*.u64")):
        copy = target / path.name
        if not copy.is_file():
            target.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(copy, path.read_bytes())


def _say(runs: list[RunDir], text: str) -> None:
    """One line into the train.log of each of `runs` (and the console)."""
    with _logging_to(runs):
        log.info("%s", text)


@contextlib.contextmanager
def _logging_to(runs: list[RunDir]) -> Iterator[None]:
    """Within the block, the log goes into the train.log of each of `runs` too."""
    handlers = [run.attach_log(log) for run in runs]
    try:
        yield
    finally:
        for handler in handlers:
            log.removeHandler(handler)
            handler.close()
