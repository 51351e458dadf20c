"""A tfm model out to Hugging Face's format and back, printed as JSON: the CPU and wall time of
`tfm export --format hf` and of loading the folder (beside loading the checkpoint itself), and
the test BLEU of the model each way it can run:

- tfm decoding the exported folder (read back as a tfm model);
- `transformers` decoding it (`MarianMTModel.generate`, num_beams as tfm's beam), with the share
  of sentences whose translation equals tfm's;
- CTranslate2 decoding the conversion made by its own `ct2-transformers-converter` (which
  starts Marian's decoder from a zero vector: the cost of that start shows here).

    python benchmarks/hf_roundtrip.py -c base.yaml                      # the published model
    python benchmarks/hf_roundtrip.py -c base.yaml --checkpoint checkpoints/base/best.pt --work /tmp/hf

Each step runs in a process of its own, timed by its resource usage (user + sys CPU seconds).
Needs the `hf` extra with `transformers` installed. Run it alone for the wall times.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import sacrebleu

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from transformer_cli.config_loading import load_config, resolve_config_path  # noqa: E402
from transformer_cli.model_source import published_model  # noqa: E402
from transformer_cli.training.run_data import prepare_run_data  # noqa: E402

LOAD = "import sys, transformer_cli as tfm; tfm.load(sys.argv[1], device='cpu')"

TFM = """
import json, sys, transformer_cli as tfm
model = tfm.load(sys.argv[1], device="cpu", threads=int(sys.argv[5]))
json.dump(model.translate(json.load(open(sys.argv[3])), beam_size=int(sys.argv[2])), open(sys.argv[4], "w"))
"""

GENERATE = """
import json, sys, torch
from transformers import MarianMTModel, MarianTokenizer
folder, beam, sources, out = sys.argv[1], int(sys.argv[2]), json.load(open(sys.argv[3])), sys.argv[4]
torch.set_num_threads(int(sys.argv[5]))
model, tokenizer = MarianMTModel.from_pretrained(folder).eval(), MarianTokenizer.from_pretrained(folder)
hyps = []
with torch.no_grad():
    for i in range(0, len(sources), 64):
        batch = tokenizer(sources[i:i + 64], return_tensors="pt", padding=True)
        hyps += tokenizer.batch_decode(model.generate(**batch, num_beams=beam), skip_special_tokens=True)
json.dump(hyps, open(out, "w"))
"""

CT2 = """
import json, sys, ctranslate2
from transformers import MarianTokenizer
folder, converted, beam, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[5]
sources = json.load(open(sys.argv[4]))
tokenizer = MarianTokenizer.from_pretrained(folder)
translator = ctranslate2.Translator(converted, intra_threads=int(sys.argv[6]))
tokens = [tokenizer.convert_ids_to_tokens(tokenizer(line)["input_ids"]) for line in sources]
results = translator.translate_batch(tokens, beam_size=beam, max_batch_size=64)
hyps = [tokenizer.decode(tokenizer.convert_tokens_to_ids(r.hypotheses[0]), skip_special_tokens=True)
        for r in results]
json.dump(hyps, open(out, "w"))
"""


def run(args: list[str]) -> dict:
    """Run `args` to its end: its wall time and CPU seconds (user + sys, its children too)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{' '.join(args[:4])} ... failed: {done.stderr.strip()[-2000:]}")
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-c", "--config", default="base.yaml")
    ap.add_argument("--checkpoint", type=Path, help="default: the config's published model")
    ap.add_argument("--work", type=Path, default=Path("/tmp/tfm-hf-roundtrip"))
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    cfg = load_config(args.config)
    checkpoint = args.checkpoint or published_model(cfg.run_dir, args.config)
    prepared, _ = prepare_run_data(cfg)
    sources, refs = prepared.text("test", cfg.data.src_lang), prepared.text("test", cfg.data.tgt_lang)
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    folder, converted = args.work / "hf", args.work / "ct2"
    (args.work / "sources.json").write_text(json.dumps(sources), encoding="utf-8")
    py, tfm = sys.executable, [sys.executable, "-m", "transformer_cli"]
    config = str(resolve_config_path(args.config))
    report: dict = {"checkpoint": str(checkpoint), "beam": args.beam, "threads": args.threads}

    report["export_hf"] = run(
        [*tfm, "export", "-c", config, "--checkpoint", str(checkpoint), "--format", "hf", "-o", str(folder)]
    )
    report["load_checkpoint"] = run([py, "-c", LOAD, str(checkpoint)])
    report["load_hf_folder"] = run([py, "-c", LOAD, str(folder)])

    def decoded(name: str, script: str, *model: str) -> dict:
        """Test2016 through `script` (its arguments: the model's paths, beam, sources, output,
        threads): BLEU, time, and the share of translations equal to tfm's from the checkpoint."""
        out = args.work / f"{name}.json"
        step = run(
            [py, "-c", script, *model, str(args.beam), str(args.work / "sources.json"), str(out), str(args.threads)]
        )
        hyps = json.loads(out.read_text(encoding="utf-8"))
        ours = hyps if name == "tfm_checkpoint" else json.loads((args.work / "tfm_checkpoint.json").read_text())
        return {
            "bleu": round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2),
            **step,
            "equal_to_tfm": round(sum(a == b for a, b in zip(hyps, ours)) / len(ours), 3),
        }

    scores = {
        "tfm_checkpoint": decoded("tfm_checkpoint", TFM, str(checkpoint)),
        "tfm_hf_folder": decoded("tfm_hf_folder", TFM, str(folder)),
        "transformers_generate": decoded("transformers", GENERATE, str(folder)),
    }
    converter = Path(py).parent / "ct2-transformers-converter"
    report["ct2_transformers_converter"] = run([str(converter), "--model", str(folder), "--output_dir", str(converted)])
    scores["ct2_from_hf_converter"] = decoded("ct2", CT2, str(folder), str(converted))
    report["test_bleu"] = scores
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
