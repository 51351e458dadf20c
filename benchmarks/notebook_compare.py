"""A seed.yaml checkpoint measured the notebook's way, next to tfm's own measures, as JSON.

Perplexity: tfm reports per-token perplexity, exp(total NLL / total target tokens). The
notebook (torchtext's legacy BucketIterator for evaluation) reports exp(mean over batches of
each batch's mean loss), over batches of 128 sentences sorted by length, which weights the
tokens of short-sentence batches more. Both are printed for val and test.

BLEU: the notebook's lineage scores greedy output with torchtext's `bleu_score` on lowercased
spaCy tokens (4-gram, no smoothing). That is sacreBLEU with `tokenize="none"` and
`smooth_method="none"` on the same space-joined tokens, printed as `notebook_token_bleu`
beside the detokenized sacreBLEU that `tfm evaluate` reports. Needs a word (spaCy) tokenizer.

    python benchmarks/notebook_compare.py --config seed.yaml
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import torch
from sacrebleu.metrics import BLEU

from transformer_cli.config_loading import load_config
from transformer_cli.data.batching import collate
from transformer_cli.data.prepared import load_prepared
from transformer_cli.evaluate import score_translations
from transformer_cli.inference.translate import TorchTranslator
from transformer_cli.loss import sequence_loss
from transformer_cli.tokenizers.word import WordTokenizer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="seed.yaml")
    ap.add_argument("--checkpoint", type=Path, help="default: the config's run's best.pt")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--batch-size", type=int, default=128)
    args = ap.parse_args()
    cfg = load_config(args.config, args.overrides)
    checkpoint = args.checkpoint or cfg.run_dir / "best.pt"
    translator = TorchTranslator.from_checkpoint(checkpoint, torch.device("cpu"))
    model = translator.model
    prepared = load_prepared(cfg)
    out: dict[str, Any] = {"checkpoint": str(checkpoint)}
    for split in ("val", "test"):
        data = prepared.split(split)
        order = sorted(range(len(data)), key=lambda i: (int(data.src_lengths[i]), int(data.tgt_lengths[i])))
        batch_means, nll_sum, tokens = [], 0.0, 0
        with torch.inference_mode():
            for start in range(0, len(order), args.batch_size):
                b = collate(
                    data, order[start : start + args.batch_size], translator.tokenizers.framing, model.config.max_len
                )
                nll = float(sequence_loss(model(b.src, b.tgt_in).float(), b.tgt_out, model.tgt_ids.pad)[1])
                batch_means.append(nll / b.n_tokens)
                nll_sum, tokens = nll_sum + nll, tokens + b.n_tokens
        out[split] = {
            "per_token_ppl": round(math.exp(nll_sum / tokens), 3),
            "notebook_batch_mean_ppl": round(math.exp(sum(batch_means) / len(batch_means)), 3),
        }
    tgt = translator.tokenizers.tgt
    if isinstance(tgt, WordTokenizer):
        sources = prepared.text("test", cfg.data.src_lang)
        refs = prepared.text("test", cfg.data.tgt_lang)
        hyps = [n_best[0] for n_best in translator.translate(sources).translations]
        hyp_tokens = [" ".join(tgt.id_to_token(h.tokens)) for h in hyps]
        ref_tokens = [" ".join(tokens) for tokens in tgt.split(refs)]  # lowercased like training
        token_bleu = BLEU(tokenize="none", smooth_method="none", force=True).corpus_score(hyp_tokens, [ref_tokens])
        out["test_greedy"] = {
            "notebook_token_bleu": round(token_bleu.score, 2),
            "sacrebleu_detok": score_translations([h.text for h in hyps], refs, tgt.lowercase).bleu,
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
