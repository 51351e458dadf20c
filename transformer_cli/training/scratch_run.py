"""The run from scratch behind the nights (train.retrain.scratch: background): what it is and
where it stands. The job that trains and promotes it: training/scratch.py.

It is an ordinary tfm run of the nightly config with no parent, named `<name>.scratch` (its
checkpoints in `checkpoints/<name>.scratch/`, its data, with tokenizers fitted on the corpus,
in `data/<name>.scratch/`), mixing in the nightly config's own parts (synthetic text,
corrections). Once it has begun (a last.pt) its data folder is taken as it is, not prepared
again: it trains on the corpus as it was when it started, however the corpus grows meanwhile.
Its folder's `scratch.json` says why it was started, after which night (that night's run
identity), where it stood when its last window ended, and, once it went through the gate, the
outcome and the latest night then.
"""

from __future__ import annotations

import copy
import json
import logging
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

from ..checkpoint import Checkpoint, CheckpointError
from ..config import Config
from ..data.manifest import DataManifest
from ..errors import UsageError
from ..fsutil import atomic_write_text
from .run_dir import RunDir

log = logging.getLogger("tfm")

SUFFIX = ".scratch"
STATE = "scratch.json"


@dataclass(frozen=True)
class ScratchRun:
    """A session of the run from scratch behind the nights of `nightly`."""

    nightly: Config  # the nightly config (train.init_from: published): its parts are mixed in
    window_minutes: float  # the most minutes this session trains (train.retrain.scratch_window_minutes)


@dataclass(frozen=True)
class State:
    """scratch.json: a run from scratch behind the nights."""

    why: str  # the rules that called for it (train.retrain's decision)
    started: str  # when (UTC, ISO 8601)
    night_identity: str  # the run identity of the night that called for it
    stands: str = ""  # where it stood when its last window ended (`epoch 2 of 15, step 300`)
    outcome: str | None = None  # the gate's decision once it is done
    promoted: bool = False
    concluded_after: str | None = None  # the run identity of the latest night when the gate decided


def scratch_config(cfg: Config) -> Config:
    """The config of `cfg`'s run from scratch: its own, with no parent, named `<name>.scratch`."""
    out = copy.deepcopy(cfg)
    out.name = cfg.name + SUFFIX
    out.train.init_from = None
    return out


def scratch_dir(cfg: Config) -> RunDir:
    """The run folder of `cfg`'s run from scratch."""
    return RunDir(scratch_config(cfg).run_dir)


def read_state(run: RunDir) -> State | None:
    """The run folder's scratch.json (None: none, or unreadable)."""
    try:
        raw: Any = json.loads((run.path / STATE).read_text(encoding="utf-8"))
        state = State(**raw)
    except (OSError, ValueError, TypeError):
        return None
    texts = (state.why, state.started, state.night_identity, state.stands)
    optional = (state.outcome, state.concluded_after)
    if not all(isinstance(t, str) for t in texts) or not all(isinstance(t, (str, type(None))) for t in optional):
        return None
    return state


def write_state(run: RunDir, state: State) -> None:
    run.create()
    atomic_write_text(run.path / STATE, json.dumps(asdict(state), indent=2) + "\n")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def status(cfg: Config) -> str:
    """Where `cfg`'s run from scratch stands, for the line of a night that finds one due."""
    run, scfg = scratch_dir(cfg), scratch_config(cfg)
    state, rules = read_state(run), cfg.train.retrain
    behind = (
        f"after this night, {rules.scratch_window_minutes:g} minutes at a time at priority {rules.scratch_priority}"
    )
    if state is None:
        return f"it trains in {run.path}, {behind}"
    if state.outcome is not None:
        done = "promoted" if state.promoted else "kept aside"
        return f"the last one ({done}: {state.outcome}) is done; a new one starts in {run.path} {behind}"
    return f"under way in {run.path} since {state.started}{where(scfg, state.stands)}; it goes on {behind}"


def where(scfg: Config, stands: str) -> str:
    """`: epoch E of N, step S, on P pairs`: where the run from scratch of config `scfg` stands
    (`stands`: as its last window left it) and the pairs of its data."""
    manifest = DataManifest.read(scfg.data_dir)
    parts = [stands] if stands else []
    if manifest is not None:
        parts.append(f"on {manifest.training_pairs:,} pairs")
    return f": {', '.join(parts)}" if parts else ""


def standing(run: RunDir, scfg: Config) -> str:
    """`epoch E of N, step S` as the run's last.pt has it ("" when it cannot be read)."""
    try:
        state = Checkpoint.read(run.last).train_state
    except (CheckpointError, UsageError):
        return ""
    if state is None:
        return ""
    progress = state.progress
    return f"epoch {progress.get('epoch', 0) + 1} of {scfg.train.epochs}, step {progress.get('step', 0)}"
