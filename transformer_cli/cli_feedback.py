"""`tfm feedback`: users' corrections and glossary terms in the config's `corrections.store`
(transformer_cli/corrections/): add them from translators' files, list them, accept or reject
held ones, compact the store's logs."""

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


def _store(config: str, overrides: list[str], quiet: bool, terms: bool = False) -> tuple[Config, CorrectionStore]:
    """The config and its store's log of corrections (of terms: `terms`)."""
    from .config_loading import load_config
    from .corrections.store import LOG, TERMS, CorrectionStore

    setup_logging(quiet)
    cfg = load_config(config, overrides)
    if cfg.corrections.store is None:
        raise UsageError("corrections.store is not set: name the folder corrections are kept in")
    return cfg, CorrectionStore(cfg.corrections.store, TERMS if terms else LOG)


@feedback.command("add")
@guarded
def add(
    files: list[Path] = typer.Argument(
        ...,
        help="TSV (source<TAB>corrected[<TAB>output[<TAB>client]]) or TMX files; with --terms, glossaries "
        "(TSV: source term<TAB>target term[<TAB>note]; TBX).",
    ),
    config: str = CONFIG,
    client: str | None = typer.Option(None, "--client", help="The client id of corrections that name none."),
    terms: bool = typer.Option(False, "--terms", help="The files are glossaries: add their terms (docs/terms.md)."),
    overrides: list[str] = SET,
    quiet: bool = QUIET,
) -> None:
    """Add corrections from translators' files, each through the guards (a held one is kept for
    review); every file is read before anything is stored, then stored 100 at a time, so a
    server posting to the same store waits for one batch, not the whole file. A TMX unit of
    another language pair or missing a segment is skipped, and counted in one line for its file.
    With --terms, glossary terms, which every translation with the store uses from then on.

    \b
    Examples:
      tfm feedback add -c base.yaml fixes.tsv
      tfm feedback add -c base.yaml memory.tmx --client agency-7
      tfm feedback add -c base.yaml --terms terms.tsv
    """
    from .corrections.guards import guarded as guards

    cfg, store = _store(config, overrides, quiet, terms)
    if terms:
        from .corrections.term_files import read_terms

        read = [read_terms(f, (cfg.data.src_lang, cfg.data.tgt_lang), client) for f in files]
    else:
        from .corrections.files import read_corrections

        read = [read_corrections(f, (cfg.data.src_lang, cfg.data.tgt_lang), client) for f in files]
    for skipped in filter(None, (r.skipped_line() for r in read)):
        log.warning("%s", skipped)
    added = store.add_batches([c for r in read for c in r.corrections], guards(cfg.corrections, terms=terms))
    held = sum(c.status == "held" for c in added)
    what = "term(s)" if terms else "correction(s)"
    log.info("%d %s added to %s: %d accepted, %d held", len(added), what, store.path, len(added) - held, held)


@feedback.command("list")
@guarded
def list_(
    config: str = CONFIG,
    held: bool = typer.Option(False, "--held", help="Only those held for review."),
    terms: bool = typer.Option(False, "--terms", help="The store's glossary terms instead of its corrections."),
    overrides: list[str] = SET,
) -> None:
    """Print the corrections (with --terms, the terms: source term as source, target term as
    corrected), one JSON object a line (id, status, reasons, source, corrected, output, client,
    origin, time, caller). Lines of the store's log that hold no record are skipped: each is a
    warning naming its line, and one more says how many."""
    _, store = _store(config, overrides, True, terms)
    for c in store.corrections():
        if not held or c.status == "held":
            typer.echo(json.dumps(c.__dict__, ensure_ascii=False))
    if damaged := store.damaged:
        numbers = ", ".join(str(d.number) for d in damaged)
        log.warning("warning: %s: %d damaged line(s) skipped: %s", store.path, len(damaged), numbers)


def _decide(config: str, ids: list[str], overrides: list[str], quiet: bool, decision: str) -> None:
    """Record `decision` on `ids`, corrections or terms (each in its own log); nothing when one
    of them is in neither."""
    _, store = _store(config, overrides, quiet)
    _, terms = _store(config, overrides, quiet, terms=True)
    store.refresh()
    terms.refresh()
    of_terms = [i for i in ids if i not in store.fold.known and i in terms.fold.known]
    unknown = [i for i in ids if i not in store.fold.known and i not in terms.fold.known]
    if unknown:
        raise UsageError(
            f"no correction {', '.join(unknown)} in {store.path} or {terms.path} (tfm feedback list [--terms]); "
            "nothing recorded"
        )
    for log_of, chosen in ((store, [i for i in ids if i not in of_terms]), (terms, of_terms)):
        if chosen and log_of.decide(chosen, decision):
            raise UsageError(f"no correction {', '.join(chosen)} in {log_of.path}; nothing more recorded")
    log.info("%d correction(s) and term(s) %s", len(ids), decision)


@feedback.command("accept")
@guarded
def accept(
    ids: list[str] = typer.Argument(..., help="Correction or term ids (tfm feedback list [--terms] --held)."),
    config: str = CONFIG,
    overrides: list[str] = SET,
    quiet: bool = QUIET,
) -> None:
    """Accept corrections held for review: answered from memory at once, trained on next."""
    _decide(config, ids, overrides, quiet, "accepted")


@feedback.command("reject")
@guarded
def reject(
    ids: list[str] = typer.Argument(..., help="Correction or term ids (tfm feedback list [--terms])."),
    config: str = CONFIG,
    overrides: list[str] = SET,
    quiet: bool = QUIET,
) -> None:
    """Reject corrections: neither answered from memory nor trained on (they stay in the log)."""
    _decide(config, ids, overrides, quiet, "rejected")


@feedback.command("compact")
@guarded
def compact(config: str = CONFIG, overrides: list[str] = SET, quiet: bool = QUIET) -> None:
    """Rewrite the store's logs (its corrections', its terms') as their records with their
    current status (accept and reject decisions folded in), so every process starting on them
    reads less. Atomic: a process killed meanwhile leaves the old log or the new one, every
    record in each; servers of the store read the new one at their next request (writers wait
    while it is written)."""
    for terms in (False, True):
        _, store = _store(config, overrides, quiet, terms)
        if not terms or store.path.exists():
            before, after = store.compact()
            log.info("%s compacted: %d line(s) -> %d", store.path, before, after)
