"""Hugging Face models in and out, measured on a trained model: what `tfm export --format hf`
and reading the folder back cost, and what the folder scores where it goes: transformers'
`generate` and CTranslate2 through its own `ct2-transformers-converter` (which starts Marian's
decoder from a zero vector, where tfm starts from its <sos> embedding), beside tfm itself and
tfm's own CTranslate2 export. Prints one JSON object.

    python benchmarks/hf_convert.py --checkpoint checkpoints/base/published.pt -c base.yaml --work /tmp/hfc

Needs the hf and ctranslate2 extras, and the config's test split (Multi30k: $TFM_DATA_SOURCE).
Run it alone on the machine: the timings are wall clock.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import sacrebleu
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from transformer_cli.checkpoint import Checkpoint  # noqa: E402
from transformer_cli.config import DecodeConfig  # noqa: E402
from transformer_cli.config_loading import load_config  # noqa: E402
from transformer_cli.export.bundle import export_checkpoint  # noqa: E402
from transformer_cli.hf.export import export_hf  # noqa: E402
from transformer_cli.hf.folder import read_folder  # noqa: E402
from transformer_cli.inference.translate import TorchTranslator, model_from_checkpoint  # noqa: E402
from transformer_cli.training.run_data import prepare_run_data  # noqa: E402


def timed(fn, *args):
    started = time.perf_counter()
    out = fn(*args)
    return out, round(time.perf_counter() - started, 3)


def bleu(hyps: list[str], refs: list[str]) -> float:
    return round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True, type=Path)
    ap.add_argument("-c", "--config", required=True)
    ap.add_argument("--work", type=Path, default=Path("/tmp/hf-convert"))
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    cfg = load_config(args.config)
    prepared, _ = prepare_run_data(cfg)
    sources, refs = prepared.text("test", cfg.data.src_lang), prepared.text("test", cfg.data.tgt_lang)

    checkpoint, read_s = timed(Checkpoint.read, args.checkpoint)
    folder = args.work / "hf"
    _, export_s = timed(export_hf, checkpoint, args.checkpoint, folder)
    back, import_s = timed(read_folder, folder)
    report: dict = {
        "parameters": model_from_checkpoint(checkpoint)[0].num_parameters(),
        "seconds": {"read_checkpoint": read_s, "export_hf": export_s, "import_hf": import_s},
        "folder_mb": round(sum(p.stat().st_size for p in folder.iterdir()) / 1e6, 1),
        "test2016_bleu": {},
    }
    cpu = torch.device("cpu")
    for beam in (1, 5):
        d = DecodeConfig(beam_size=beam, max_len_a=0.0, max_len_b=100, recase=False)
        tfm = TorchTranslator.load(checkpoint, cpu, d)
        again = TorchTranslator.load(back, cpu, d)
        ours = [h[0].text for h in tfm.translate(sources).translations]
        report["test2016_bleu"][f"tfm_beam{beam}"] = bleu(ours, refs)
        report["test2016_bleu"][f"tfm_after_round_trip_beam{beam}"] = bleu(
            [h[0].text for h in again.translate(sources).translations], refs
        )

        from transformers import MarianMTModel, MarianTokenizer

        hf = MarianMTModel.from_pretrained(folder).eval()
        tokenizer = MarianTokenizer.from_pretrained(folder)
        started, outputs = time.perf_counter(), []
        with torch.no_grad():
            for i in range(0, len(sources), 64):
                batch = tokenizer(sources[i : i + 64], return_tensors="pt", padding=True)
                outputs += tokenizer.batch_decode(
                    hf.generate(**batch, num_beams=beam, max_new_tokens=100), skip_special_tokens=True
                )
        report["test2016_bleu"][f"transformers_generate_beam{beam}"] = bleu(outputs, refs)
        report["seconds"][f"transformers_generate_beam{beam}"] = round(time.perf_counter() - started, 1)
        report.setdefault("same_output_as_tfm", {})[f"beam{beam}"] = round(
            sum(a == b for a, b in zip(outputs, ours)) / len(ours), 4
        )

    converter = Path(sys.executable).parent / "ct2-transformers-converter"
    ct2_dir = args.work / "ct2-from-hf"
    started = time.perf_counter()
    subprocess.run(
        [str(converter), "--model", str(folder), "--output_dir", str(ct2_dir)], check=True, capture_output=True
    )
    report["seconds"]["ct2_transformers_converter"] = round(time.perf_counter() - started, 1)
    import ctranslate2
    from transformers import MarianTokenizer

    tokenizer = MarianTokenizer.from_pretrained(folder)
    translator = ctranslate2.Translator(str(ct2_dir), intra_threads=args.threads)
    pieces = [tokenizer.convert_ids_to_tokens(tokenizer(s)["input_ids"]) for s in sources]
    own = args.work / "ct2-tfm"
    export_checkpoint(Checkpoint.read(args.checkpoint), args.checkpoint, own)
    for beam in (1, 5):
        results = translator.translate_batch(pieces, beam_size=beam, max_decoding_length=100)
        text = [tokenizer.convert_tokens_to_string(r.hypotheses[0]) for r in results]
        report["test2016_bleu"][f"ct2_via_transformers_converter_beam{beam}"] = bleu(text, refs)
        d = DecodeConfig(beam_size=beam, max_len_a=0.0, max_len_b=100, recase=False)
        from transformer_cli.api import open_backend

        ct2_own = open_backend(own, "cpu", decode=d, threads=args.threads)
        report["test2016_bleu"][f"ct2_tfm_export_beam{beam}"] = bleu(
            [h[0].text for h in ct2_own.translate(sources).translations], refs
        )
    print(json.dumps(report))


if __name__ == "__main__":
    main()
