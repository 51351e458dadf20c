"""inference/outputs.py: what translating takes and returns, plain data without torch: Sources
(lines tokenized once, counted by their tokens, joined as if encoded together) and Output."""

from __future__ import annotations

import subprocess
import sys

from transformer_cli.inference.outputs import Output, Sources, Translation


def test_sources_count_their_tokens_without_eos_and_join_as_encoded_together():
    a = Sources(3, [0, 2], [[5, 6, 3], [7, 3]], [(2, 90)])
    b = Sources(2, [1], [[8, 9, 10, 3]], [(1, 70)])
    assert (a.tokens, b.tokens) == (3, 3)
    joined = Sources.concat([a, b])
    assert joined == Sources(5, [0, 2, 4], [[5, 6, 3], [7, 3], [8, 9, 10, 3]], [(2, 90), (4, 70)])
    assert joined.tokens == a.tokens + b.tokens
    assert Sources.concat([]) == Sources(0, [], [], [])


def test_an_output_holds_each_lines_n_best():
    out = Output([[Translation("A man.", [5, 6], -0.5), Translation("Man.", [6], -1.0)], []], [(0, 90)])
    assert out.translations[0][0].text == "A man." and out.truncated == [(0, 90)]


def test_it_imports_no_torch():
    code = "import sys; import transformer_cli.inference.outputs; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
