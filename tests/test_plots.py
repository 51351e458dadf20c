"""plots.py: PNG figures, written atomically: a run's loss and perplexity curves, and a
translation's cross-attention heatmap."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from transformer_cli.plots import plot_attention, plot_curves

PNG = b"\x89PNG\r\n\x1a\n"


@dataclass
class Point:
    step: int
    elapsed_s: float
    train_loss: float
    valid_loss: float
    valid_ppl: float


def test_curves_of_a_run_are_a_png(tmp_path):
    history = [Point(10 * i, 30.0 * i, 4.0 / i, 4.2 / i, float(np.exp(4.2 / i))) for i in range(1, 6)]
    plot_curves(history, tmp_path / "curves.png", title="toy")
    assert (tmp_path / "curves.png").read_bytes()[:8] == PNG
    assert [p.name for p in tmp_path.iterdir()] == ["curves.png"]  # no temp file left


def test_attention_is_a_png_heatmap(tmp_path):
    weights = np.full((3, 4), 0.25)
    plot_attention(["ein", "hund", ".", "</s>"], ["a", "dog", "."], weights, tmp_path / "attention.png")
    data = (tmp_path / "attention.png").read_bytes()
    assert data[:8] == PNG and len(data) > 1000
