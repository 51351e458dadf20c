"""synthetic/noise.py: noised back-translation's noise (Edunov et al. 2018): about a tenth of
the words dropped, a tenth blanked with the filler, none moved more than three places; the
draws a function of the seed and the line alone."""

from __future__ import annotations

from transformer_cli.synthetic import noise
from transformer_cli.synthetic.noise import MAX_SHIFT, noised
from transformer_cli.tokenizers.text_marks import FILLER

WORDS = [f"w{i}" for i in range(40)]
LINE = " ".join(WORDS)


def test_the_same_seed_and_line_are_noised_the_same_way_anywhere():
    assert noised(LINE, 1) == noised(LINE, 1) != noised(LINE, 2)
    assert noised("", 1) == ""
    assert noised("  a  ", 3) in ("a", FILLER, "")  # words are what spaces separate


def test_about_a_tenth_of_the_words_are_dropped_and_a_tenth_blanked():
    dropped = blanked = 0
    for seed in range(200):
        out = noised(LINE, seed).split()
        kept = [w for w in out if w != FILLER]
        assert len(set(kept)) == len(kept) and set(kept) <= set(WORDS)
        blanked += len(out) - len(kept)
        dropped += len(WORDS) - len(out)
    total = 200 * len(WORDS)
    assert 0.08 < dropped / total < 0.12 and 0.07 < blanked / total < 0.11  # (blanks: of the kept words)


def test_no_word_moves_more_than_three_places(monkeypatch):
    monkeypatch.setattr(noise, "DROP", 0.0)  # the shuffle alone
    monkeypatch.setattr(noise, "BLANK", 0.0)
    moved = 0
    for seed in range(200):
        out = noised(LINE, seed).split()
        assert sorted(out) == sorted(WORDS)
        shifts = [abs(out.index(w) - i) for i, w in enumerate(WORDS)]
        assert max(shifts) <= MAX_SHIFT
        moved += max(shifts) == MAX_SHIFT
    assert moved > 0  # the bound is reached
