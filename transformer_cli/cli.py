"""The `tfm` command line: parse options, load the config, call one function, map errors.

No training or data logic lives here. torch and spaCy are imported inside the commands, so
`tfm --help` stays instant.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from pathlib import Path
from typing import Any, Optional
from collections.abc import Callable

import typer

from . import __version__
from .errors import EXIT_FAILURE, TfmError

app = typer.Typer(
    name="tfm",
    help="Train, evaluate and serve Transformer translation models.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

log = logging.getLogger("tfm")

CONFIG_HELP = ("Config file, or a bare name found in ./configs/ or among the configs shipped "
               "with tfm (base.yaml, seed.yaml, tiny.yaml, best.yaml).")
SET_HELP = "Override one config value, e.g. --set train.lr=3e-4 (repeatable)."


def _setup_logging(quiet: bool) -> None:
    """Timestamped lines on stderr; --quiet keeps warnings and errors only."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%Y-%m-%d %H:%M:%S"))
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    handler.setLevel(logging.WARNING if quiet else logging.INFO)
    log.propagate = False


def _guarded(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn expected errors into one line on stderr and a documented exit code."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except TfmError as e:
            typer.echo(f"tfm: error: {e}", err=True)
            raise typer.Exit(e.exit_code) from None
        except KeyboardInterrupt:
            typer.echo("tfm: interrupted", err=True)
            raise typer.Exit(130) from None
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except Exception as e:  # a bug: still one line, the traceback on request
            if os.environ.get("TFM_DEBUG"):
                raise
            typer.echo(f"tfm: internal error: {type(e).__name__}: {e} "
                       "(set TFM_DEBUG=1 for the traceback)", err=True)
            raise typer.Exit(EXIT_FAILURE) from None

    return run


def _version(value: bool) -> None:
    if value:
        typer.echo(f"tfm {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """Train, evaluate and serve Transformer translation models."""


@app.command()
@_guarded
def preprocess(
    config: str = typer.Option("base.yaml", "--config", "-c", help=CONFIG_HELP),
    source: Optional[str] = typer.Option(
        None, "--source", help="Folder or URL holding the corpus files (overrides data.source "
        "and $TFM_DATA_SOURCE)."),
    overrides: list[str] = typer.Option([], "--set", "-s", help=SET_HELP),
    force: bool = typer.Option(False, "--force", help="Rebuild even when nothing changed."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only warnings and errors on stderr."),
) -> None:
    """Fetch and verify the corpus, fit the tokenizer, encode all splits.

    \b
    Examples:
      tfm preprocess --config base.yaml
      tfm preprocess --config seed.yaml --source ../shared/data/multi30k
      TFM_DATA_SOURCE=/data/multi30k tfm preprocess -c base.yaml --set tokenizer.vocab_size=10000
    """
    from .config import load_config

    _setup_logging(quiet)
    cfg = load_config(config, overrides)
    if source is not None:
        cfg.data.source = source
    from .data.preprocess import prepare, summary_table
    from .errors import StoppedBySignal
    from .training.signals import GracefulStop, StopRequested

    try:
        with GracefulStop() as stop:
            prepared, rebuilt = prepare(cfg, force=force, check_stop=stop.check)
    except StopRequested as e:
        raise StoppedBySignal(e.signum, f"stopped by signal {e.signum}; nothing was written "
                                        "(run the same command to start again)") from None
    if rebuilt:
        log.info("preprocessed in %.1f s -> %s", prepared.manifest["elapsed_s"], prepared.folder)
    else:
        log.info("up to date: %s (inputs unchanged; --force rebuilds)", prepared.folder)
    if not quiet:
        typer.echo(summary_table(prepared.manifest))


@app.command()
@_guarded
def train(
    config: str = typer.Option("base.yaml", "--config", "-c", help=CONFIG_HELP),
    overrides: list[str] = typer.Option([], "--set", "-s", help=SET_HELP),
    device: Optional[str] = typer.Option(None, "--device", help="auto, cpu, cuda or mps "
                                         "(overrides train.device)."),
    restart: bool = typer.Option(False, "--restart", help="Start the run over instead of resuming it."),
    promote: Optional[str] = typer.Option(None, "--promote", help="if-better (default), always or "
                                          "never: when best.pt replaces published.pt."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars; only warnings and "
                               "errors on stderr (the run's train.log gets everything)."),
) -> None:
    """Train a model; preprocesses first if needed, resumes an interrupted run.

    Re-running the same command continues where it stopped; a finished run is a no-op.
    Exit codes: 0 done, 1 failure, 2 bad config/input, 75 run busy (locked),
    130/143 stopped by SIGINT/SIGTERM after saving (run again to resume).

    \b
    Examples:
      tfm train --config base.yaml
      tfm train -c seed.yaml --set train.epochs=20 --device cpu
      torchrun --nproc_per_node 2 -m transformer_cli train -c base.yaml
      0 3 * * * cd /srv/tfm && tfm train -c base.yaml --quiet   # crontab
    """
    from .config import load_config
    from .training.run_dir import RunDir

    _setup_logging(quiet)
    _check_choice("--device", device, ("auto", "cpu", "cuda", "mps"))
    _check_choice("--promote", promote, ("if-better", "always", "never"))
    extra = [f"train.device={device}"] if device else []
    extra += [f"train.promote={promote}"] if promote else []
    cfg = load_config(config, [*overrides, *extra])
    run = RunDir(cfg.run_dir)
    if int(os.environ.get("RANK", "0")) == 0:
        run.lock()  # before importing torch: a busy newcomer exits 75 at once
    from .training.session import run_training

    run_training(cfg, restart=restart, show_progress=not quiet and sys.stderr.isatty(), run=run)


def _check_choice(option: str, value: Optional[str], choices: tuple[str, ...]) -> None:
    """Refuse an option value outside `choices`, naming the option as the user typed it."""
    if value is not None and value not in choices:
        from .errors import UsageError

        raise UsageError(f"{option} must be {', '.join(choices[:-1])} or {choices[-1]} (got {value!r})")


@app.command("config")
@_guarded
def show_config(
    config: str = typer.Option("base.yaml", "--config", "-c", help=CONFIG_HELP),
    overrides: list[str] = typer.Option([], "--set", "-s", help=SET_HELP),
    markdown: bool = typer.Option(False, "--markdown", help="Print the whole schema as Markdown "
                                  "(docs/config.md) instead."),
) -> None:
    """Print a config fully resolved: every key's value, help, type, bounds and default.

    \b
    Examples:
      tfm config -c base.yaml
      tfm config -c seed.yaml --set train.lr=1e-3 | grep -A1 train.lr
      tfm config --markdown > docs/config.md
    """
    from .config import load_config
    from .config_docs import describe, schema_markdown

    typer.echo(schema_markdown() if markdown else describe(load_config(config, overrides)), nl=not markdown)


@app.command()
@_guarded
def publish(
    config: str = typer.Option("base.yaml", "--config", "-c", help=CONFIG_HELP),
    rollback: bool = typer.Option(False, "--rollback", help="Put the model that the last "
                                  "promotion replaced back as published.pt."),
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
    from .config import load_config
    from .training.run_dir import RunDir

    _setup_logging(quiet=False)
    cfg = load_config(config, overrides)
    run = RunDir(cfg.run_dir)
    if not run.path.is_dir():
        from .errors import UsageError

        raise UsageError(f"no run in {run.path}: train one with `tfm train -c {config}`")
    run.lock()
    try:
        from .training.promotion import describe_published, rollback as roll_back

        if rollback:
            typer.echo(roll_back(run, cfg.train.promote))
        typer.echo(describe_published(run))
    finally:
        run.unlock()


DEVICE_HELP = "auto, cpu, cuda or mps."
PRECISION_HELP = "fp32 (default: exact), bf16, or auto (bf16 where the hardware is fast at it)."


@app.command()
@_guarded
def evaluate(
    config: str = typer.Option("base.yaml", "--config", "-c", help=CONFIG_HELP),
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", help="Model to score: a "
                                              "checkpoint or a `tfm export` folder (default: the "
                                              "config's run's best.pt)."),
    split: str = typer.Option("test", "--split", help="val or test (ignored with --src/--ref)."),
    src: Optional[Path] = typer.Option(None, "--src", help="Your own source file (one sentence per line)."),
    ref: Optional[Path] = typer.Option(None, "--ref", help="Its reference translations (aligned with --src)."),
    beam_size: Optional[int] = typer.Option(None, "--beam-size", min=1, help="1 = greedy (default: decode.beam_size)."),
    length_penalty: Optional[float] = typer.Option(None, "--length-penalty", min=0.0),
    device: str = typer.Option("auto", "--device", help=DEVICE_HELP),
    precision: str = typer.Option("fp32", "--precision", help=PRECISION_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of the table."),
    overrides: list[str] = typer.Option([], "--set", "-s", help=SET_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only warnings and errors on stderr."),
) -> None:
    """Score a checkpoint: loss, perplexity, sacreBLEU and chrF (with signatures).

    Writes the hypotheses to hyps/<split>.beam<N>.txt beside the checkpoint (by default the
    config's run directory).

    \b
    Examples:
      tfm evaluate --config base.yaml
      tfm evaluate -c seed.yaml --split val --beam-size 5 --json
      tfm evaluate --checkpoint model.pt --src news.de --ref news.en
    """
    import json

    from .config import load_config

    _setup_logging(quiet)
    extra = [f"decode.beam_size={beam_size}"] if beam_size else []
    extra += [f"decode.length_penalty={length_penalty}"] if length_penalty is not None else []
    cfg = load_config(config, [*overrides, *extra])
    if cfg.decode.n_best > cfg.decode.beam_size:
        cfg.decode.n_best = cfg.decode.beam_size
    sources, references, label = _evaluation_texts(cfg, split, src, ref)
    from .api import open_backend
    from .evaluate import evaluate_texts

    path = checkpoint or cfg.run_dir / "best.pt"
    translator = open_backend(path, device, precision, cfg.decode)
    hyps = path.parent / "hyps" / f"{label}.beam{cfg.decode.beam_size}.txt"
    report = evaluate_texts(translator, sources, references, label, str(path), hyps)
    typer.echo(json.dumps(report.as_json()) if as_json else report.as_table())


def _evaluation_texts(cfg: Any, split: str, src: Optional[Path], ref: Optional[Path]
                      ) -> tuple[list[str], list[str], str]:
    from .errors import UsageError

    if (src is None) != (ref is None):
        raise UsageError("--src and --ref go together")
    if src is not None and ref is not None:
        from .data.sources import read_parallel

        sources, references = read_parallel(src, ref)
        return sources, references, src.name
    if split not in ("val", "test"):
        raise UsageError(f"--split must be val or test (got {split!r})")
    from .data.preprocess import prepare

    prepared, _ = prepare(cfg)
    return (prepared.text(split, cfg.data.src_lang), prepared.text(split, cfg.data.tgt_lang), split)


@app.command()
@_guarded
def translate(
    text: list[str] = typer.Argument(None, help="Sentences to translate; none or '-' reads stdin."),
    config: str = typer.Option("base.yaml", "--config", "-c", help="Its run's published.pt "
                               "(else best.pt) is the default model. " + CONFIG_HELP),
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", help="Model file to use instead."),
    beam_size: Optional[int] = typer.Option(None, "--beam-size", min=1, help="1 = greedy "
                                            "(default: as the model was configured)."),
    n_best: int = typer.Option(1, "--n-best", min=1, help="Print the N best translations per input "
                               "as INDEX<TAB>SCORE<TAB>TEXT lines."),
    length_penalty: Optional[float] = typer.Option(None, "--length-penalty", min=0.0),
    max_len: Optional[int] = typer.Option(None, "--max-len", min=1, help="Longest output in tokens "
                                          "(default: 1.5 x source + 10)."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", min=1, help="Sentences per batch."),
    device: str = typer.Option("auto", "--device", help=DEVICE_HELP),
    precision: str = typer.Option("fp32", "--precision", help=PRECISION_HELP),
    attention: Optional[Path] = typer.Option(None, "--attention", help="Write a PNG heatmap of the "
                                             "cross-attention (one sentence only)."),
) -> None:
    """Translate sentences with a trained model; streams stdin line by line.

    \b
    Examples:
      tfm translate "Ein Mann steht an einem Urinal mit einer Tasse Kaffee."
      tfm translate --beam-size 5 --n-best 3 "Zwei Hunde spielen im Schnee."
      tfm translate -c seed.yaml < input.de > output.en
      tfm translate --attention attn.png "Eine Frau liest ein Buch."
    """
    from .api import load
    from .errors import UsageError

    _setup_logging(quiet=False)
    model = load(checkpoint or config, device, precision)
    options = model.options(beam_size, n_best, max_len, length_penalty, batch_size)
    lines = list(text or [])
    from_stdin = not lines or lines == ["-"]
    if attention is not None and (from_stdin or len(lines) != 1):
        raise UsageError("--attention needs exactly one sentence as an argument")
    stdin = _StdinLines()
    source = iter(stdin) if from_stdin else iter(lines)
    chunk = 1 if from_stdin and sys.stdin.isatty() else 256
    offset = 0
    for inputs, out in model.translate_stream(source, options, chunk):
        for i, n in out.truncated:
            log.warning("warning: line %d has %d tokens; truncated to %d (the model's limit)",
                        offset + i + 1, n, model.max_src_len)
        for i, n_best_list in enumerate(out.translations):
            if n_best == 1:
                typer.echo(n_best_list[0].text)
            else:
                for hyp in n_best_list:
                    typer.echo(f"{offset + i}\t{hyp.score:.4f}\t{hyp.text}")
        sys.stdout.flush()
        offset += len(inputs)
    if stdin.error is not None:
        raise stdin.error
    if attention is not None:
        from .plots import plot_attention

        att = model.attention(lines[0], options)
        plot_attention(att.source_tokens, att.target_tokens, att.weights, attention)
        log.info("attention heatmap written to %s", attention)


@app.command()
@_guarded
def serve(
    config: str = typer.Option("base.yaml", "--config", "-c", help="Its serve: section configures "
                               "the server; its run's published.pt (else best.pt) is the model. "
                               + CONFIG_HELP),
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", help="Model file to serve "
                                              "(and watch for new versions) instead."),
    host: Optional[str] = typer.Option(None, "--host", help="Address to listen on (default: "
                                       "serve.host, 127.0.0.1)."),
    port: Optional[int] = typer.Option(None, "--port", min=0, max=65535, help="Port (default: "
                                       "serve.port, 8000)."),
    device: str = typer.Option("auto", "--device", help=DEVICE_HELP),
    precision: str = typer.Option("fp32", "--precision", help=PRECISION_HELP),
    overrides: list[str] = typer.Option([], "--set", "-s", help=SET_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only warnings and errors on stderr."),
) -> None:
    """Serve a model over HTTP with dynamic batching; reloads it when `tfm train` promotes a new one.

    POST /translate {"inputs": "..." | [...], "parameters": {"beam_size": 5}}, GET /health,
    GET /metrics (Prometheus), GET / (a page to try it). The bearer token comes from
    $TFM_SERVE_TOKEN or serve.token_file, never from the command line. SIGTERM finishes the
    requests in flight, then exits 0.

    \b
    Examples:
      tfm serve -c base.yaml
      tfm serve --checkpoint model.pt --port 9000 --set serve.threads=2
      curl -s localhost:8000/translate -d '{"inputs": "Ein Hund rennt."}'
    """
    from .api import published_model
    from .config import load_config

    _setup_logging(quiet)
    cfg = load_config(config, overrides)
    cfg.serve.host = host or cfg.serve.host
    cfg.serve.port = cfg.serve.port if port is None else port
    path = checkpoint or published_model(cfg.run_dir, config)
    from .serving.server import serve as run_server

    run_server(cfg.serve, path, device, precision)


@app.command()
@_guarded
def export(
    config: str = typer.Option("base.yaml", "--config", "-c", help="Its run's published.pt (else "
                               "best.pt) is exported by default. " + CONFIG_HELP),
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", help="Checkpoint file to "
                                              "export instead."),
    output: Path = typer.Option(..., "--output", "-o", help="Folder to write (an earlier export "
                                "there is replaced; any other existing folder must be empty)."),
    fmt: str = typer.Option("ctranslate2", "--format", help="ctranslate2 (the only one)."),
    quantization: str = typer.Option("none", "--quantization", help="Weight type: none (float32), "
                                     "int8, int8_float32, int16 or float16."),
    overrides: list[str] = typer.Option([], "--set", "-s", help=SET_HELP),
) -> None:
    """Export a model for CTranslate2: a self-contained folder (model, tokenizer, manifest).

    `tfm translate`, `tfm evaluate`, `tfm serve` and `tfm.load` accept the folder wherever they
    accept a checkpoint. Needs the extra: pip install 'tfm[ctranslate2]'.

    \b
    Examples:
      tfm export -c base.yaml --output exports/base
      tfm export --checkpoint checkpoints/base/best.pt --quantization int8 -o exports/base-int8
      tfm translate --checkpoint exports/base-int8 "Ein Hund rennt."
    """
    from .errors import UsageError

    if fmt != "ctranslate2":
        raise UsageError(f"--format must be ctranslate2, the only export format (got {fmt!r})")
    if checkpoint is None:
        from .api import published_model
        from .config import load_config

        checkpoint = published_model(load_config(config, overrides).run_dir, config)
    from .export.bundle import export_checkpoint, is_export

    if is_export(checkpoint):
        raise UsageError(f"{checkpoint} is already an export; export its source checkpoint")
    manifest = export_checkpoint(checkpoint, output, quantization)
    size = sum(p.stat().st_size for p in output.iterdir())
    typer.echo(f"exported {checkpoint} -> {output} (ctranslate2, {manifest['weights']} weights, "
               f"{size / 1e6:.1f} MB, {manifest['seconds']:.1f} s)")


class _StdinLines:
    """Lines of stdin as text. A line that is not UTF-8 ends the lines (those before it are
    still translated and printed); `error` then names it, for the caller to raise."""

    def __init__(self) -> None:
        self.error: Optional[Exception] = None

    def __iter__(self):
        from .errors import UsageError

        for number, raw in enumerate(sys.stdin.buffer, start=1):
            try:
                yield raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as e:
                self.error = UsageError(f"stdin line {number}: not valid UTF-8 (byte "
                                        f"0x{raw[e.start]:02x} at column {e.start + 1})")
                return


def main() -> None:
    app()


if __name__ == "__main__":
    main()
