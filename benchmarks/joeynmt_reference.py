"""Training throughput of JoeyNMT 2.3 and of tfm on the same model, data and machine, as JSON.

JoeyNMT runs from its own Python environment (it pins old protobuf; keep it apart):

    python3 -m venv /opt/joey && /opt/joey/bin/pip install torch==2.13.0 \
        joeynmt==2.3.0 importlib_metadata sentencepiece==0.2.0
    python benchmarks/joeynmt_reference.py --joey-python /opt/joey/bin/python

Both sides get the same Transformer (3+3 layers, d_model 256, 8 heads, d_ff 512, pre-norm,
tied and shared embeddings), the same joint SentencePiece model (tfm's, from `tfm preprocess
-c base.yaml`), batches of 128 sentences, Adam with inverse-sqrt warmup, label smoothing 0.1,
clipping 1.0. JoeyNMT's own log line "Tokens per Sec" (non-pad target tokens over each
logging window) is read, first window dropped; it is stopped after --windows windows.
tfm is then timed with benchmarks/train_throughput.py in fp32 and in its default precision.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from transformer_cli.config_loading import load_config
from transformer_cli.data.prepared import load_prepared
from transformer_cli.data.sources import fetch_corpus, read_lines, resolve_source

TOKENS_PER_SEC = re.compile(r"Tokens per Sec:\s+([\d.]+)")
MATCHING = ["model.norm=pre", "train.batch_size=128", "train.batch_tokens=null"]


def joey_config(work: Path, cfg, spm_model: Path, vocab: Path) -> dict:
    m, t = cfg.model, cfg.train

    def side(lang: str) -> dict:
        return {
            "lang": lang,
            "level": "bpe",
            "max_length": 100,
            "voc_file": str(vocab),
            "tokenizer_type": "sentencepiece",
            "tokenizer_cfg": {"model_file": str(spm_model)},
        }

    stack = {
        "type": "transformer",
        "num_layers": m.n_encoder_layers,
        "num_heads": m.n_heads,
        "embeddings": {"embedding_dim": m.d_model, "scale": True},
        "hidden_size": m.d_model,
        "ff_size": m.d_ff,
        "dropout": m.dropout,
        "layer_norm": "pre",
    }
    return {
        "name": "tfm-reference",
        "model_dir": str(work / "model"),
        "use_cuda": False,
        "data": {
            "train": str(work / "train"),
            "dev": str(work / "val"),
            "dataset_type": "plain",
            "special_symbols": {
                "unk_token": "<unk>",
                "unk_id": 0,
                "pad_token": "<pad>",
                "pad_id": 1,
                "bos_token": "<sos>",
                "bos_id": 2,
                "eos_token": "<eos>",
                "eos_id": 3,
            },
            "src": side(cfg.data.src_lang),
            "trg": side(cfg.data.tgt_lang),
        },
        "training": {
            "random_seed": t.seed,
            "optimizer": "adam",
            "adam_betas": list(t.betas),
            "learning_rate": t.lr,
            "scheduling": "warmupinversesquareroot",
            "learning_rate_warmup": max(1, t.warmup_steps),
            "label_smoothing": 0.1,
            "batch_size": 128,
            "batch_type": "sentence",
            "normalization": "tokens",
            "clip_grad_norm": 1.0,
            "epochs": 1,
            "logging_freq": 10,
            "validation_freq": 10**9,
            "shuffle": True,
            "overwrite": True,
        },
        "testing": {"beam_size": 1},
        "model": {
            "initializer": "xavier_uniform",
            "embed_initializer": "xavier_uniform",
            "tied_embeddings": True,
            "tied_softmax": True,
            "encoder": stack,
            "decoder": dict(stack),
        },
    }


def peak_rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def run_joeynmt(python: str, config: Path, windows: int, timeout: float) -> dict:
    proc = subprocess.Popen(
        [python, "-m", "joeynmt", "train", str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    rates: list[float] = []
    tail: list[str] = []
    rss = None
    started = time.monotonic()
    assert proc.stdout is not None
    for line in proc.stdout:
        tail = (tail + [line.rstrip()])[-20:]
        match = TOKENS_PER_SEC.search(line)
        if match:
            rates.append(float(match.group(1)))
            rss = peak_rss_mb(proc.pid) or rss
        if len(rates) > windows or time.monotonic() - started > timeout:
            break
    proc.terminate()
    proc.wait(timeout=30)
    if len(rates) < 2:
        raise SystemExit("JoeyNMT logged no throughput; its last lines:\n" + "\n".join(tail))
    kept = rates[1:]  # the first window includes start-up
    return {
        "tokens_per_s": round(statistics.median(kept), 1),
        "windows": kept,
        "peak_rss_mb": rss,
        "precision": "fp32 (JoeyNMT disables fp16 on CPU)",
    }


def run_tfm(config: str, precision: str, steps: int) -> dict:
    here = Path(__file__).with_name("train_throughput.py")
    cmd = [
        sys.executable,
        str(here),
        "--single",
        "--config",
        config,
        "--steps",
        str(steps),
        *[f"--set={o}" for o in MATCHING],
        f"--set=train.precision={precision}",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(out.stderr.strip())
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--joey-python", required=True, help="python of an environment with joeynmt 2.3")
    ap.add_argument("--config", default="base.yaml", help="tfm config whose model/data are mirrored")
    ap.add_argument("--windows", type=int, default=6, help="JoeyNMT logging windows of 10 steps")
    ap.add_argument("--steps", type=int, default=60, help="tfm steps timed per precision")
    ap.add_argument("--timeout", type=float, default=1800)
    args = ap.parse_args()

    cfg = load_config(args.config, MATCHING)
    prepared = load_prepared(cfg)
    spm_model = prepared.folder / "spm.shared.model"
    if not spm_model.is_file():
        raise SystemExit(f"{args.config} has no joint SentencePiece model in {prepared.folder}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for f in fetch_corpus(cfg.data, resolve_source(cfg.data)):
            if f.split in ("train", "val"):
                (work / f"{f.split}.{f.lang}").write_text("".join(x + "\n" for x in read_lines(f.path)))
        pieces = prepared.tokenizers.src.id_to_token(range(4, prepared.tokenizers.src.vocab_size))
        (work / "vocab.txt").write_text("".join(p + "\n" for p in pieces))
        (work / "config.yaml").write_text(yaml.safe_dump(joey_config(work, cfg, spm_model, work / "vocab.txt")))
        joey = run_joeynmt(args.joey_python, work / "config.yaml", args.windows, args.timeout)
    tfm_fp32 = run_tfm(args.config, "fp32", args.steps)
    tfm_auto = run_tfm(args.config, "auto", args.steps)
    print(
        json.dumps(
            {
                "model": "3+3 layers, d_model 256, 8 heads, d_ff 512, pre-norm, tied joint 8k SentencePiece",
                "batch": "128 sentences",
                "joeynmt": joey,
                "tfm_fp32": tfm_fp32,
                f"tfm_{tfm_auto['precision']}": tfm_auto,
                "ratio_tfm_fp32_vs_joeynmt": round(tfm_fp32["tokens_per_s"] / joey["tokens_per_s"], 2),
                f"ratio_tfm_{tfm_auto['precision']}_vs_joeynmt": round(
                    tfm_auto["tokens_per_s"] / joey["tokens_per_s"], 2
                ),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
