"""`tfm feedback`: users' corrections in the config's `corrections.store` (transformer_cli/
corrections/): add them from translators' files, list them, accept or reject held ones, compact
the store's log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from .cli_app import CONFIG_HELP, SET_HELP, app, guarded, log, setup_logging
from .errors import UsageError

if TYPE_CHECKING:
    from .config import Config
    from .corrections.store import CorrectionStore

feedback = typer.Typer(
    help="Users' corrections of translations: added, listed, accepted or rejected (corrections.store).",
    no_args_is_help=True,
)
app.add_typer(feedback, name="feedback")
CONFIG = typer.Option("base.yaml", "--config", "-c", help=CONFIG_HELP)
SET = typer.Option([], "--set", "-s", help=SET_HELP)
QUIET = typer.Option(False, "--quiet", "-q", help="Only warnings and errors on stderr.")


def _store(config: str, overrides: list[str], quiet: bool) -> tuple[Config, CorrectionStore]:
    from .config_loading import load_config
    from .corrections.store import CorrectionStore

    setup_logging(quiet)
    cfg = load_config(config, overrides)
    if cfg.corrections.store is None:
        raise UsageError("corrections.store is not set: name the folder corrections are kept in")
    return cfg, CorrectionStore(cfg.corrections.store)


@feedback.command("add")
@guarded
def add(
    files: list[Path] = typer.Argument(..., help="TSV (source<TAB>corrected[<TAB>output[<TAB>client]]) or TMX files."),
    config: str = CONFIG,
    client: str | None = typer.Option(None, "--client", help="The client id of corrections that name none."),
    overrides: list[str] = SET,
    quiet: bool = QUIET,
) -> None:
    """Add corrections from translators' files, each through the guards (a held one is kept for
    review); every file is read before anything is stored, then stored 100 at a time, so a
    server posting to the same store waits for one batch, not the whole file. A TMX unit of
    another language pair or missing a segment is skipped, and counted in one line for its file.

    \b
    Examples:
      tfm feedback add -c base.yaml fixes.tsv
      tfm feedback add -c base.yaml memory.tmx --client agency-7
    """
    from .corrections.files import read_corrections
    from .corrections.guards import guarded as guards

    cfg, store = _store(config, overrides, quiet)
    read = [read_corrections(f, (cfg.data.src_lang, cfg.data.tgt_lang), client) for f in files]
    for skipped in filter(None, (r.skipped_line() for r in read)):
        log.warning("%s", skipped)
    added = store.add_batches([c for r in read for c in r.corrections], guards(cfg.corrections))
    held = sum(c.status == "held" for c in added)
    log.info("%d correction(s) added to %s: %d accepted, %d held", len(added), store.path, len(added) - held, held)


@feedback.command("list")
@guarded
def list_(
    config: str = CONFIG,
    held: bool = typer.Option(False, "--held", help="Only those held for review."),
    overrides: list[str] = SET,
) -> None:
    """Print the corrections, one JSON object a line (id, status, reasons, source, corrected,
    output, client, origin, time, caller). Lines of the store's log that hold no record are
    skipped: each is a warning naming its line, and one more says how many."""
    _, store = _store(config, overrides, True)
    for c in store.corrections():
        if not held or c.status == "held":
            typer.echo(json.dumps(c.__dict__, ensure_ascii=False))
    if damaged := store.damaged:
        numbers = ", ".join(str(d.number) for d in damaged)
        log.warning("warning: %s: %d damaged line(s) skipped: %s", store.path, len(damaged), numbers)


def _decide(config: str, ids: list[str], overrides: list[str], quiet: bool, decision: str) -> None:
    _, store = _store(config, overrides, quiet)
    unknown = store.decide(ids, decision)
    if unknown:
        raise UsageError(f"no correction {', '.join(unknown)} in {store.path} (tfm feedback list); nothing recorded")
    log.info("%d correction(s) %s", len(ids), decision)


@feedback.command("accept")
@guarded
def accept(
    ids: list[str] = typer.Argument(..., help="Correction ids (tfm feedback list --held)."),
    config: str = CONFIG,
    overrides: list[str] = SET,
    quiet: bool = QUIET,
) -> None:
    """Accept corrections held for review: answered from memory at once, trained on next."""
    _decide(config, ids, overrides, quiet, "accepted")


@feedback.command("reject")
@guarded
def reject(
    ids: list[str] = typer.Argument(..., help="Correction ids (tfm feedback list)."),
    config: str = CONFIG,
    overrides: list[str] = SET,
    quiet: bool = QUIET,
) -> None:
    """Reject corrections: neither answered from memory nor trained on (they stay in the log)."""
    _decide(config, ids, overrides, quiet, "rejected")


@feedback.command("compact")
@guarded
def compact(config: str = CONFIG, overrides: list[str] = SET, quiet: bool = QUIET) -> None:
    """Rewrite the store's log as its corrections with their current status (accept and reject
    decisions folded in), so every process starting on it reads less. Atomic: a process killed
    meanwhile leaves the old log or the new one, every correction in each; servers of the store
    read the new one at their next request (writers wait while it is written)."""
    _, store = _store(config, overrides, quiet)
    before, after = store.compact()
    log.info("%s compacted: %d line(s) -> %d", store.path, before, after)
