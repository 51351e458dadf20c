"""PNG figures: training curves of a run, and cross-attention heatmaps of a translation."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from .fsutil import atomic_write


def _pyplot() -> Any:  # matplotlib.pyplot, imported when a figure is drawn
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> None:
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=120, bbox_inches="tight"))


class CurvePoint(Protocol):
    """What a validation record (training/metrics.ValidationRecord) shows on the curves."""

    @property
    def step(self) -> int: ...

    @property
    def elapsed_s(self) -> float: ...

    @property
    def train_loss(self) -> float: ...

    @property
    def valid_loss(self) -> float: ...

    @property
    def valid_ppl(self) -> float: ...


def plot_curves(history: Sequence[CurvePoint], path: Path, title: str = "") -> None:
    """Train/validation loss and validation PPL against steps and wall time."""
    plt = _pyplot()
    steps = [r.step for r in history]
    minutes = [r.elapsed_s / 60 for r in history]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    ax = axes[0]
    ax.plot(steps, [r.train_loss for r in history], marker="o", label="train loss")
    ax.plot(steps, [r.valid_loss for r in history], marker="o", label="valid loss")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss (NLL per token)")
    ax.grid(alpha=0.3)
    ax.legend()
    ax = axes[1]
    ax.plot(minutes, [r.valid_ppl for r in history], marker="o", color="tab:orange")
    ax.set_xlabel("wall time (minutes)")
    ax.set_ylabel("validation perplexity")
    ax.set_yscale("log")
    ax.grid(alpha=0.3, which="both")
    if title:
        fig.suptitle(title)
    _save(fig, path)
    plt.close(fig)


def plot_attention(src_tokens: list[str], tgt_tokens: list[str], weights: Any, path: Path) -> None:
    """Heatmap of attention weights [tgt_len, src_len], source on x, target on y."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(0.45 * len(src_tokens) + 2, 0.45 * len(tgt_tokens) + 1.5))
    image = ax.imshow(weights, cmap="viridis", aspect="auto", vmin=0.0)
    ax.set_xticks(range(len(src_tokens)), src_tokens, rotation=60, ha="right")
    ax.set_yticks(range(len(tgt_tokens)), tgt_tokens)
    ax.set_xlabel("source")
    ax.set_ylabel("translation")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    _save(fig, path)
    plt.close(fig)
