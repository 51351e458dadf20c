"""`tfm preprocess`, `tfm train`, `tfm config`, `tfm publish`: preparing data, training, publishing."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import TYPE_CHECKING

import typer

from .cli_app import CONFIG_HELP, DEVICE_HELP, REVERSE_HELP, SET_HELP, app, guarded, log, setup_logging
from .errors import UsageError, check_choice

if TYPE_CHECKING:
    from .config import Config


@app.command()
@guarded
def preprocess(
    config: str = typer.Option("base.yaml", "--config", "-c", help=CONFIG_HELP),
    source: str | None = typer.Option(
        None, "--source", help="Folder or URL holding the corpus files (overrides data.source and $TFM_DATA_SOURCE)."
    ),
    overrides: list[str] = typer.Option([], "--set", "-s", help=SET_HELP),
    force: bool = typer.Option(False, "--force", help="Rebuild even when nothing changed."),
    verify: bool = typer.Option(
        False,
        "--verify",
        help="Read every corpus and prepared file to "
        "check its SHA-256 (otherwise files that kept their recorded size "
        "and modification time are trusted); rebuild what does not match.",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only warnings and errors on stderr."),
    reverse: bool = typer.Option(False, "--reverse", help=REVERSE_HELP),
) -> None:
    """Fetch and verify the corpus, fit the tokenizer, encode all splits.

    \b
    Examples:
      tfm preprocess --config base.yaml
      tfm preprocess --config seed.yaml --source ../shared/data/multi30k
      TFM_DATA_SOURCE=/data/multi30k tfm preprocess -c base.yaml --set tokenizer.vocab_size=10000
    """
    from .config_loading import load_config
    from .synthetic.reverse import reverse_config

    setup_logging(quiet)
    cfg = load_config(config, overrides)
    if reverse:
        cfg = reverse_config(cfg)
    if source is not None:
        cfg.data.source = source
    from .data.manifest import summary_table
    from .errors import StoppedBySignal
    from .training.run_data import prepare_run_data
    from .training.signals import GracefulStop, StopRequested

    try:
        with GracefulStop("stopping after the current chunk, keeping nothing half-done") as stop:
            prepared, rebuilt = prepare_run_data(cfg, stop.check, force=force, verify=verify)
    except StopRequested as e:
        raise StoppedBySignal(
            e.signum, f"stopped by signal {e.signum}; nothing was written (run the same command to start again)"
        ) from None
    if rebuilt:
        log.info("preprocessed in %.1f s -> %s", prepared.manifest.elapsed_s, prepared.folder)
    else:
        log.info(
            "up to date: %s (inputs unchanged%s; --force rebuilds)",
            prepared.folder,
            ", every file read and verified" if verify else "",
        )
    if not quiet:
        typer.echo(summary_table(prepared.manifest))


@app.command()
@guarded
def train(
    config: str = typer.Option("base.yaml", "--config", "-c", help=CONFIG_HELP),
    overrides: list[str] = typer.Option([], "--set", "-s", help=SET_HELP),
    device: str | None = typer.Option(None, "--device", help=DEVICE_HELP[:-1] + " (overrides train.device)."),
    restart: bool = typer.Option(False, "--restart", help="Start the run over instead of resuming it."),
    init_from: str | None = typer.Option(
        None,
        "--init-from",
        help="Start a new run from this trained model instead of random "
        "weights: a checkpoint file, or `published` (overrides train.init_from; see `tfm config`).",
    ),
    promote: str | None = typer.Option(
        None, "--promote", help="if-better (default), always or never: when best.pt replaces published.pt."
    ),
    nproc_per_node: int | None = typer.Option(
        None,
        "--nproc-per-node",
        min=1,
        help="Train in N processes on this machine (GPUs, or CPU "
        "processes with gloo), started by tfm through torch's launcher after it takes the run's "
        "lock: the exit codes stay tfm's (75 busy, 2, 1, 130/143), unlike under torchrun.",
    ),
    quiet: bool = typer.Option(
        False,
        "--quiet",
        "-q",
        help="No progress bars; only warnings and errors on stderr (the run's train.log gets everything).",
    ),
    reverse: bool = typer.Option(False, "--reverse", help=REVERSE_HELP),
    scratch: bool = typer.Option(
        False,
        "--scratch",
        help="Only the retrain from scratch behind the nights (train.retrain.scratch: background): "
        "start the one a night found due, or go on with it for train.retrain.scratch_window_minutes, "
        "and put it through the promotion gate once done; the nightly command does this after its "
        "night (docs/cron.md). Exit 75 while another holds it.",
    ),
) -> None:
    """Train a model; preprocesses first if needed, resumes an interrupted run.

    Re-running the same command continues where it stopped; a finished run is a no-op.
    With --init-from (train.init_from) a new run starts from a trained model: its weights,
    architecture and tokenizers; `published` continues the run's published model whenever the
    corpus changes (the recommended nightly line, docs/cron.md).
    Exit codes: 0 done, 1 failure, 2 bad config/input, 75 run busy (locked),
    130/143 stopped by SIGINT/SIGTERM after saving (run again to resume).

    \b
    Examples:
      tfm train --config base.yaml
      tfm train -c seed.yaml --set train.epochs=20 --device cpu
      tfm train -c base.yaml --init-from checkpoints/base/published.pt --set train.continued.epochs=4
      torchrun --nproc_per_node 2 -m transformer_cli train -c base.yaml
      tfm train -c base.yaml --nproc-per-node 2   # the same, with tfm's exit codes (cron)
      tfm train -c bt.yaml --reverse   # the model that back-translates for bt.yaml
      tfm train -c base.yaml --init-from published --scratch   # the retrain from scratch behind the nights
      0 3 * * * cd /srv/tfm && tfm train -c base.yaml --quiet   # crontab
    """
    from .config_loading import load_config
    from .config_train import DEVICES, PROMOTE_POLICIES
    from .synthetic.reverse import reverse_config
    from .training.run_dir import RunDir

    setup_logging(quiet)
    check_choice("--device", device, DEVICES)
    check_choice("--promote", promote, PROMOTE_POLICIES)
    extra = [f"train.device={device}"] if device else []
    extra += [f"train.promote={promote}"] if promote else []
    cfg = load_config(config, [*overrides, *extra])
    if reverse:
        cfg = reverse_config(cfg)
    if init_from is not None:
        if not init_from.strip():
            raise UsageError("--init-from must name a checkpoint file or be `published`")
        cfg.train.init_from = init_from
    if cfg.train.tensorboard:  # now, not at the first validation
        from .extras import import_extra

        import_extra("tensorboard", "train.tensorboard")
    from .host.priority import apply as apply_priority

    apply_priority(cfg.train.priority)  # before any thread or process starts: they inherit it
    if scratch:
        return _scratch_only(cfg, restart, nproc_per_node)
    run = RunDir(cfg.run_dir)
    if nproc_per_node and nproc_per_node > 1 and "RANK" not in os.environ:
        from .training.launch import launch

        launch(cfg, run, nproc_per_node, _without_option(sys.argv[2:], "--nproc-per-node"))
    else:
        if int(os.environ.get("RANK", "0")) == 0:
            run.lock()  # before importing torch: a busy newcomer exits 75 at once
        from .training.session import run_training

        run_training(cfg, restart=restart, show_progress=not quiet and sys.stderr.isatty(), run=run)
    _after_night(cfg)


def _scratch_only(cfg: Config, restart: bool, nproc_per_node: int | None) -> None:
    """`tfm train --scratch`: the retrain from scratch behind the nights, and nothing else."""
    if restart or (nproc_per_node or 1) > 1 or "RANK" in os.environ:
        raise UsageError("--scratch goes on as its run stands, in one process: without --restart and --nproc-per-node")
    if cfg.train.init_from != "published":
        raise UsageError(
            "--scratch: the retrain from scratch behind the nights is the nightly run's: "
            "give --init-from published (or train.init_from: published)"
        )
    from .training.scratch import run_scratch

    run_scratch(cfg, asked=True)


def _after_night(cfg: Config) -> None:
    """After a night (in one process, or the processes tfm started: torchrun's leave it to
    `tfm train --scratch`), the retrain from scratch behind the nights, when there is one."""
    if "RANK" in os.environ:
        return
    from .training.scratch import behind_nights, run_scratch

    if behind_nights(cfg):
        run_scratch(cfg)


def _without_option(argv: list[str], name: str) -> list[str]:
    """`argv` without the option `name` and its value (`name VALUE` or `name=VALUE`)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == name:
            skip = True
        elif not arg.startswith(f"{name}="):
            out.append(arg)
    return out


NPROC_HELP = (
    "Translate in N processes on this machine, each with its share of the CPUs, sharing the "
    "caches: the same corpus as one process at that many threads."
)
HELPER_HELP = "Translate only, beside the main process."
# The options `tfm distill` and `tfm synthesize` share (all but --config's help), declared once
# (typer copies an option where a command takes it).
PAIRS_SET = typer.Option([], "--set", "-s", help=SET_HELP)
PAIRS_NPROC = typer.Option(1, "--nproc-per-node", min=1, max=1024, help=NPROC_HELP)
PAIRS_HELPER = typer.Option(False, "--helper", hidden=True, help=HELPER_HELP)
PAIRS_QUIET = typer.Option(False, "--quiet", "-q", help="Only warnings and errors on stderr.")


@app.command("distill")
@guarded
def distill_corpus(
    config: str = typer.Option(
        ..., "--config", "-c", help="A config that forward-translates its training sources. " + CONFIG_HELP
    ),
    overrides: list[str] = PAIRS_SET,
    nproc_per_node: int = PAIRS_NPROC,
    helper: bool = PAIRS_HELPER,
    quiet: bool = PAIRS_QUIET,
) -> None:
    """Translate a config's training sources with its teachers (beam search): the corpus its
    student trains on (`tfm train -c CFG` then uses it; it makes it itself when it is missing).
    Distillation is forward translation of the training sources (synthetic.forward_translation.
    text: [parallel], synthetic.real_weight: 0; a distill: section reads as those keys): this is
    `tfm synthesize` of such a config (the same cache, folder and resume).

    \b
    Examples:
      tfm distill -c distilled.yaml
      tfm distill -c distilled.yaml --set synthetic.forward_translation.beam_size=4
      tfm distill -c distilled.yaml --nproc-per-node 2
    """
    _make_pairs(config, overrides, quiet, distill=True, processes=nproc_per_node, helper=helper)


@app.command()
@guarded
def synthesize(
    config: str = typer.Option(..., "--config", "-c", help="A config with a synthetic: section. " + CONFIG_HELP),
    overrides: list[str] = PAIRS_SET,
    nproc_per_node: int = PAIRS_NPROC,
    helper: bool = PAIRS_HELPER,
    quiet: bool = PAIRS_QUIET,
) -> None:
    """Make the training pairs of a config's monolingual text: back-translation of target-language
    text by the reverse model, forward translation of source-language text by its teachers (of
    the training sources, `parallel`: distillation), mixed with the real pairs (`tfm train -c
    CFG` then uses them; it makes them itself when missing).

    Each line is translated once per model and search (synthetic.cache_dir): a later run
    translates only lines it has not seen, and runs sharing a cache share the work. Streams and
    resumes after a stop or a kill, with the same result, byte for byte.

    \b
    Examples:
      tfm train -c bt.yaml --reverse && tfm synthesize -c bt.yaml
      tfm synthesize -c bt.yaml --set synthetic.back_translation.search=beam
      tfm synthesize -c bt.yaml --nproc-per-node 4
    """
    _make_pairs(config, overrides, quiet, distill=False, processes=nproc_per_node, helper=helper)


def _make_pairs(
    config: str, overrides: list[str], quiet: bool, distill: bool, processes: int = 1, helper: bool = False
) -> None:
    """`tfm synthesize` (`tfm distill`: of a config that forward-translates its training sources):
    the config's synthetic corpus, made current by `processes` processes (this one and helpers: synthetic/sharing.py),
    or, as a `helper`, translations only."""
    from .config_loading import load_config
    from .config_synthetic import PARALLEL
    from .errors import StoppedBySignal
    from .synthetic.mixture import help_translate
    from .synthetic.mixture import synthesize as make_synthetic
    from .synthetic.sharing import helpers, threads_each
    from .training.signals import GracefulStop, StopRequested

    setup_logging(quiet)
    cfg = load_config(config, overrides)
    if distill and PARALLEL not in cfg.synthetic.forward_translation.text:
        raise UsageError(
            f"{config}: no forward translation of the training sources: set "
            f"synthetic.forward_translation.text: [{PARALLEL}] and its teachers (checkpoint files or folders)"
        )
    if not cfg.synthetic.enabled:
        raise UsageError(
            f"{config}: no monolingual text: set synthetic.back_translation.text or synthetic.forward_translation.text"
        )
    threads = threads_each(cfg, processes)
    if processes > 1:
        cfg.train.threads = threads
    try:
        with GracefulStop("stopping after the current chunk; the translations so far are kept") as stop:
            if helper:  # warnings are the main process's to give (it says the same)
                logging.getLogger("tfm").setLevel(logging.ERROR)
                help_translate(cfg, stop.check)
                return
            with helpers(config, overrides, processes - 1, threads) if processes > 1 else contextlib.nullcontext():
                folder = make_synthetic(cfg, stop.check)
    except StopRequested as e:
        raise StoppedBySignal(
            e.signum,
            f"stopped by signal {e.signum}; the translations made so far are kept (run the same command to continue)",
        ) from None
    typer.echo(f"synthetic corpus: {folder}")


@app.command("config")
@guarded
def show_config(
    config: str = typer.Option("base.yaml", "--config", "-c", help=CONFIG_HELP),
    overrides: list[str] = typer.Option([], "--set", "-s", help=SET_HELP),
    markdown: bool = typer.Option(
        False, "--markdown", help="Print the whole schema as Markdown (docs/config.md) instead."
    ),
) -> None:
    """Print a config fully resolved: every key's value, help, type, bounds and default.

    \b
    Examples:
      tfm config -c base.yaml
      tfm config -c seed.yaml --set train.lr=1e-3 | grep -A1 train.lr
      tfm config --markdown > docs/config.md
    """
    from .config_docs import describe, schema_markdown
    from .config_loading import load_config

    typer.echo(schema_markdown() if markdown else describe(load_config(config, overrides)), nl=not markdown)


@app.command()
@guarded
def publish(
    config: str = typer.Option("base.yaml", "--config", "-c", help=CONFIG_HELP),
    rollback: bool = typer.Option(
        False, "--rollback", help="Put the model that the last promotion replaced back as published.pt."
    ),
    overrides: list[str] = typer.Option([], "--set", "-s", help=SET_HELP),
) -> None:
    """Show what a run publishes, or roll back the last promotion.

    Without options, lists published.pt and the earlier published models kept in
    published.history/ (train.keep_published of them). --rollback restores the newest of those
    (repeat it to go further back) and records it in promotions.log, so the next `tfm train`
    does not promote the same best.pt again. Exit 75 while a `tfm train` holds the run.

    \b
    Examples:
      tfm publish -c base.yaml
      tfm publish -c base.yaml --rollback
    """
    from .config_loading import load_config
    from .training.run_dir import RunDir

    setup_logging(quiet=False)
    cfg = load_config(config, overrides)
    run = RunDir(cfg.run_dir)
    if not run.path.is_dir():
        raise UsageError(f"no run in {run.path}: train one with `tfm train -c {config}`")
    run.lock()
    try:
        from .training.promotion import Policy
        from .training.promotion import rollback as roll_back
        from .training.published import describe_published

        if rollback:
            typer.echo(roll_back(run, Policy(cfg.train.promote)))
        typer.echo(describe_published(run))
    finally:
        run.unlock()
