"""`tfm evaluate`, `tfm translate`, `tfm serve`, `tfm export`: using a trained model."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from .cli_app import CONFIG_HELP, DEVICE_HELP, PRECISION_HELP, REVERSE_HELP, SET_HELP, app, guarded, log, setup_logging
from .export.engine import QUANTIZATIONS, weight_type
from .host.stop_signals import stop_signals_raise

if TYPE_CHECKING:
    from .inference.outputs import Output


@app.command()
@guarded
def evaluate(
    config: str = typer.Option("base.yaml", "--config", "-c", help=CONFIG_HELP),
    checkpoint: list[Path] = typer.Option(
        [],
        "--checkpoint",
        help="Model to score: a "
        "checkpoint or a `tfm export` folder; repeated, an "
        "ensemble (default: decode.ensemble, else the "
        "config's run's published.pt, else best.pt, as "
        "translate, serve and export choose).",
    ),
    split: str = typer.Option("test", "--split", help="val or test (ignored with --src/--ref)."),
    src: Path | None = typer.Option(None, "--src", help="Your own source file (one sentence per line)."),
    ref: Path | None = typer.Option(None, "--ref", help="Its reference translations (aligned with --src)."),
    beam_size: int | None = typer.Option(None, "--beam-size", min=1, help="1 = greedy (default: decode.beam_size)."),
    length_penalty: float | None = typer.Option(None, "--length-penalty", min=0.0),
    device: str = typer.Option("auto", "--device", help=DEVICE_HELP),
    precision: str = typer.Option("fp32", "--precision", help=PRECISION_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of the table."),
    overrides: list[str] = typer.Option([], "--set", "-s", help=SET_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only warnings and errors on stderr."),
    reverse: bool = typer.Option(False, "--reverse", help=REVERSE_HELP),
) -> None:
    """Score a checkpoint: loss, perplexity, sacreBLEU and chrF (with signatures).

    Writes the hypotheses to hyps/<split>.beam<N>.txt beside the checkpoint (by default the
    config's run directory).

    \b
    Examples:
      tfm evaluate --config base.yaml
      tfm evaluate -c seed.yaml --split val --beam-size 5 --json
      tfm evaluate --checkpoint model.pt --src news.de --ref news.en
      tfm evaluate -c bt.yaml --reverse --split val   # the back-translation model
    """
    import json

    from .api import decode_option, open_backend
    from .config_loading import load_config
    from .evaluate import evaluate_texts

    setup_logging(quiet)
    cfg = load_config(config, overrides)
    if reverse:
        from .synthetic.reverse import reverse_config

        cfg = reverse_config(cfg)
    if beam_size is not None:  # the options win over the config, within the same bounds
        cfg.decode.beam_size = decode_option("beam_size", beam_size, "beam_size")
        cfg.decode.n_best = min(cfg.decode.n_best, beam_size)
    if length_penalty is not None:
        cfg.decode.length_penalty = decode_option("length_penalty", length_penalty, "length_penalty")
    paths = chosen_models(cfg, config, checkpoint)  # before any preprocessing
    translator = open_backend(paths, device, precision, cfg.decode, threads="auto")
    if src is None:
        _check_direction(translator.metadata.languages, cfg, paths[0], split)
    sources, references, label = _evaluation_texts(cfg, split, src, ref)
    hyps = paths[0].parent / "hyps" / f"{label}.beam{cfg.decode.beam_size}.txt"
    report = evaluate_texts(translator, sources, references, label, " + ".join(map(str, paths)), hyps)
    typer.echo(json.dumps(report.as_json()) if as_json else report.as_table())


def chosen_models(cfg: Any, config: str, checkpoints: list[Path]) -> list[Path]:
    """The models a command uses: --checkpoint (repeated: an ensemble), else the config's
    decode.ensemble, else its run's published model (else best.pt)."""
    from .model_source import published_model

    if checkpoints:
        return list(checkpoints)
    if cfg.decode.ensemble:
        return [Path(p) for p in cfg.decode.ensemble]
    return [published_model(cfg.run_dir, config)]


def _check_direction(languages: tuple[str, str] | None, cfg: Any, model: Path, split: str) -> None:
    """Refuse to score a model on the config's split in the other direction (a reverse model
    scored on the forward split gives a BLEU near 0 that says nothing)."""
    from .errors import UsageError

    wanted = (cfg.data.src_lang, cfg.data.tgt_lang)
    if languages is None or languages == wanted:
        return
    hint = ": add --reverse" if languages == wanted[::-1] else ": use its own config, or --src and --ref"
    raise UsageError(
        f"{model} translates {languages[0]}->{languages[1]}, but the config's {split} split is "
        f"{wanted[0]}->{wanted[1]}{hint}"
    )


def _evaluation_texts(cfg: Any, split: str, src: Path | None, ref: Path | None) -> tuple[list[str], list[str], str]:
    from .errors import UsageError

    if (src is None) != (ref is None):
        raise UsageError("--src and --ref go together")
    if src is not None and ref is not None:
        from .data.sources import read_parallel

        sources, references = read_parallel(src, ref)
        return sources, references, src.name
    if split not in ("val", "test"):
        raise UsageError(f"--split must be val or test (got {split!r})")
    from .training.run_data import prepare_run_data

    prepared, _ = prepare_run_data(cfg)
    return (prepared.text(split, cfg.data.src_lang), prepared.text(split, cfg.data.tgt_lang), split)


@app.command()
@guarded
def translate(
    text: list[str] = typer.Argument(None, help="Sentences to translate; none or '-' reads stdin."),
    config: str = typer.Option(
        "base.yaml", "--config", "-c", help="Its run's published.pt (else best.pt) is the default model. " + CONFIG_HELP
    ),
    checkpoint: list[Path] = typer.Option(
        [],
        "--checkpoint",
        help="Model to use instead; repeated, an ensemble (default: decode.ensemble, else the run's published model).",
    ),
    beam_size: int | None = typer.Option(
        None, "--beam-size", min=1, help="1 = greedy (default: as the model was configured)."
    ),
    n_best: int = typer.Option(
        1, "--n-best", min=1, help="Print the N best translations per input as INDEX<TAB>SCORE<TAB>TEXT lines."
    ),
    length_penalty: float | None = typer.Option(None, "--length-penalty", min=0.0),
    max_output_len: int | None = typer.Option(
        None, "--max-output-len", min=1, help="Longest output in tokens (default: 1.5 x source + 10)."
    ),
    batch_size: int | None = typer.Option(None, "--batch-size", min=1, help="Sentences per batch."),
    device: str = typer.Option("auto", "--device", help=DEVICE_HELP),
    precision: str = typer.Option("fp32", "--precision", help=PRECISION_HELP),
    attention: Path | None = typer.Option(
        None, "--attention", help="Write a PNG heatmap of the cross-attention (one sentence only)."
    ),
    recase: bool | None = typer.Option(
        None,
        "--recase/--no-recase",
        help="Give lines typed all "
        "lowercase or all in capitals the training sources' casing "
        "(default: the model's decode.recase, normally on).",
    ),
    glossary: Path | None = typer.Option(
        None,
        "--glossary",
        help="A TSV file of terms (source term, tab, target term) the translations use "
        "(default: the config's decode.glossary); a term that cannot be placed is said on stderr.",
    ),
) -> None:
    """Translate sentences with a trained model; streams stdin line by line.

    \b
    Examples:
      tfm translate "Ein Mann steht an einem Urinal mit einer Tasse Kaffee."
      tfm translate --beam-size 5 --n-best 3 "Zwei Hunde spielen im Schnee."
      tfm translate -c seed.yaml < input.de > output.en
      tfm translate --attention attn.png "Eine Frau liest ein Buch."
      tfm translate --glossary terms.tsv "Ein Hund an der Leine."
    """
    from .api import open_translator
    from .config_loading import load_config
    from .errors import UsageError

    setup_logging(quiet=False)
    cfg = load_config(config)
    model = open_translator(
        chosen_models(cfg, config, checkpoint),
        device,
        precision,
        threads="auto",
        ensemble_weights=cfg.decode.ensemble_weights,
        ensemble_combine=cfg.decode.ensemble_combine,
    )
    options = model.options(beam_size, n_best, max_output_len, length_penalty, batch_size, recase)
    options.glossary = str(glossary) if glossary is not None else cfg.decode.glossary
    options.glossary_store = cfg.glossary_store
    lines = [_utf8(os.fsencode(arg), f"argument {n}") for n, arg in enumerate(text or [], start=1)]
    from_stdin = not lines or lines == ["-"]
    if attention is not None and (from_stdin or len(lines) != 1):
        raise UsageError("--attention needs exactly one sentence as an argument")
    stdin = _StdinLines()
    source = iter(stdin) if from_stdin else iter(lines)
    chunk = 1 if from_stdin and sys.stdin.isatty() else 256
    offset = 0
    for inputs, out in model.translate_stream(source, options, chunk):
        _say_what_was_lost(out, offset, model.max_src_len)
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


def _say_what_was_lost(out: Output, offset: int, max_src_len: int) -> None:
    """On stderr: the lines of `out` (the first one `offset` + 1) cut to the model's limit, and
    the glossary terms that could not be placed in their translations."""
    for i, n in out.truncated:
        log.warning(
            "warning: line %d has %d tokens; truncated to %d (the model's limit)",
            offset + i + 1,
            n,
            max_src_len,
        )
    for i, uses in enumerate(out.terms):
        for use in uses:
            if use.how == "unplaced":
                log.warning(
                    "warning: line %d: term %r -> %r not placed: %s",
                    offset + i + 1,
                    use.source,
                    use.target,
                    use.why,
                )


@app.command()
@guarded
def serve(
    config: str = typer.Option(
        "base.yaml",
        "--config",
        "-c",
        help="Its serve: section configures "
        "the server; its run's published.pt (else best.pt) is the model. " + CONFIG_HELP,
    ),
    checkpoint: list[Path] = typer.Option(
        [], "--checkpoint", help="Model to serve (and watch for new versions) instead; repeated, an ensemble."
    ),
    host: str | None = typer.Option(None, "--host", help="Address to listen on (default: serve.host, 127.0.0.1)."),
    port: int | None = typer.Option(None, "--port", min=0, max=65535, help="Port (default: serve.port, 8000)."),
    device: str = typer.Option("auto", "--device", help=DEVICE_HELP),
    precision: str = typer.Option("fp32", "--precision", help=PRECISION_HELP),
    overrides: list[str] = typer.Option([], "--set", "-s", help=SET_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only warnings and errors on stderr."),
) -> None:
    """Serve a model over HTTP with dynamic batching; reloads it when `tfm train` promotes a new one.

    POST /translate {"inputs": "..." | [...], "parameters": {"beam_size": 5}}, GET /health,
    GET /metrics (Prometheus), GET / (a page to try it). The bearer token comes from
    $TFM_SERVE_TOKEN or serve.token_file, never from the command line. A busy port or an
    unknown host exits 2 before the model is loaded. SIGTERM finishes the requests in flight
    (those still running after serve.shutdown_grace_s are answered 503), then exits 0.

    \b
    Examples:
      tfm serve -c base.yaml
      tfm serve --checkpoint model.pt --port 9000 --set serve.threads=2
      curl -s localhost:8000/translate -d '{"inputs": "Ein Hund rennt."}'
    """
    from .config_loading import load_config
    from .extras import require_extra

    require_extra("serve", "tfm serve")  # before anything else: a newcomer's first `tfm serve`
    setup_logging(quiet)
    cfg = load_config(config, overrides)
    cfg.serve.host = host or cfg.serve.host
    cfg.serve.port = cfg.serve.port if port is None else port
    paths = chosen_models(cfg, config, checkpoint)
    from .serving.server import serve as run_server

    run_server(
        cfg.serve,
        paths,
        device,
        precision,
        cfg.decode.ensemble_weights,
        cfg.decode.ensemble_combine,
        cfg.corrections,
        (cfg.decode.glossary, cfg.glossary_store),
    )


@app.command()
@guarded
def export(
    config: str = typer.Option(
        "base.yaml",
        "--config",
        "-c",
        help="Its run's published.pt (else best.pt) is exported by default. " + CONFIG_HELP,
    ),
    checkpoint: Path | None = typer.Option(
        None, "--checkpoint", help="Model to export instead: a checkpoint file or a Hugging Face MarianMT folder."
    ),
    output: Path = typer.Option(
        ...,
        "--output",
        "-o",
        help="Folder to write (an earlier export there is replaced; any other existing folder must be empty).",
    ),
    fmt: str | None = typer.Option(
        None,
        "--format",
        help="What to write (default: export.format, "
        "ctranslate2): ctranslate2 (a CTranslate2 model that tfm runs), hf "
        "(a MarianMT folder for transformers: MarianMTModel/MarianTokenizer."
        "from_pretrained; needs 'tfm[hf]'), or a format a plugin registers.",
    ),
    quantization: str | None = typer.Option(
        None,
        "--quantization",
        help="--format ctranslate2's weight "
        f"type (export.options.quantization): {', '.join(QUANTIZATIONS)} "
        "(none: float32; the 16-bit float types are for GPUs).",
    ),
    overrides: list[str] = typer.Option([], "--set", "-s", help=SET_HELP),
) -> None:
    """Export a model: a self-contained folder (model, tokenizer, manifest with sha256s).

    --format ctranslate2 (pip install 'tfm[ctranslate2]') or hf: a MarianMT folder that
    transformers loads and CTranslate2's ct2-transformers-converter converts (pip install
    'tfm[hf]'). `tfm translate`, `tfm evaluate`, `tfm serve` and `tfm.load` accept either
    folder wherever they accept a checkpoint.

    \b
    Examples:
      tfm export -c base.yaml --output exports/base
      tfm export --checkpoint checkpoints/base/best.pt --quantization int8 -o exports/base-int8
      tfm export -c base.yaml --format hf -o exports/base-hf
      tfm translate --checkpoint exports/base-int8 "Ein Hund rennt."
    """
    from .config_loading import load_config
    from .errors import StoppedBySignal, UsageError
    from .export_manifest import export_engine
    from .extras import import_extra
    from .model_io import read_model
    from .seams import EXPORTERS

    cfg = load_config(config, overrides)  # export.format and its options, the plugins
    fmt = fmt or cfg.export.format
    EXPORTERS.check(fmt, "--format")
    options = dict(cfg.export.options) if fmt == cfg.export.format else {}
    if quantization is not None:
        settings = EXPORTERS.settings_of(fmt)
        if settings is None or "quantization" not in getattr(settings, "__dataclass_fields__", {}):
            raise UsageError(
                f"--quantization is for --format ctranslate2 (export.options.quantization); --format {fmt} has none"
            )
        weight_type(quantization)  # (a name it does not know: refused as --quantization)
        options["quantization"] = quantization
    settings = EXPORTERS.options(fmt, options)
    exporter = EXPORTERS[fmt]
    if exporter.extra is not None:  # before anything else, as every command that needs an extra
        import_extra(exporter.extra, "tfm export" + ("" if fmt == "ctranslate2" else f" --format {fmt}"))
    if checkpoint is None:
        from .model_source import published_model

        checkpoint = published_model(cfg.run_dir, config)
    if export_engine(checkpoint) not in (None, "transformers"):  # no model tfm reads back
        raise UsageError(f"{checkpoint} is already an export; export its source checkpoint")
    before = _folder_id(output)
    stops: list[int] = []  # the signals that stopped it, if any
    try:
        with stop_signals_raise(stops):
            model, where = read_model(checkpoint)
            manifest, seconds = exporter.export(model, where, output, settings)
    except BaseException:
        if not stops:
            raise
    if stops:  # stopped, whatever the signal's exception became on its way (host/stop_signals.py)
        if _folder_id(output) == before:
            what = f"during export; nothing was written to {output}"
        else:  # it came after the export took output's place
            what = f"at the end of the export; {output} was written in full"
        raise StoppedBySignal(stops[0], f"stopped by signal {stops[0]} {what}")
    size = sum(p.stat().st_size for p in output.iterdir())
    typer.echo(
        f"exported {checkpoint} -> {output} ({exporter.describe(manifest)}, {size / 1e6:.1f} MB, {seconds:.1f} s)"
    )


def _folder_id(folder: Path) -> tuple[int, int] | None:
    """The device and inode of `folder` (None: there is none), which an export that took its
    place changes."""
    try:
        st = folder.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


class _StdinLines:
    """Lines of stdin as text. A line that is not UTF-8 ends the lines (those before it are
    still translated and printed); `error` then names it, for the caller to raise."""

    def __init__(self) -> None:
        self.error: Exception | None = None

    def __iter__(self) -> Iterator[str]:
        from .errors import UsageError

        for number, raw in enumerate(sys.stdin.buffer, start=1):
            try:
                line = _utf8(raw, f"stdin line {number}")
            except UsageError as e:
                self.error = e
                return
            yield line.rstrip("\r\n")


def _utf8(raw: bytes, where: str) -> str:
    """`raw` decoded, or a UsageError naming `where` and the first byte that is not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        from .errors import UsageError

        raise UsageError(f"{where}: not valid UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1})") from None
