"""Real-data checks: run only where TFM_DATA_SOURCE names the Multi30k folder (CI does)."""

import json

from helpers import run_tfm


def test_preprocess_real_multi30k_seed_and_base(tmp_path, multi30k_dir):
    for name in ("seed", "base"):
        r = run_tfm(
            "preprocess",
            "-c",
            f"{name}.yaml",
            "--source",
            str(multi30k_dir),
            "--set",
            f"data.dir={tmp_path}/data",
            cwd=tmp_path,
        )
        assert r.returncode == 0, r.stderr
        m = json.loads((tmp_path / "data" / name / "manifest.json").read_text())
        assert {s: v["pairs"] for s, v in m["splits"].items()} == {"train": 29000, "val": 1014, "test": 1000}
        if name == "seed":  # the notebook's vocab: 7,855 de / 5,893 en
            assert abs(m["vocab_size"]["src"] - 7855) <= 10 and abs(m["vocab_size"]["tgt"] - 5893) <= 10
        else:
            assert m["vocab_size"] == {"src": 8000, "tgt": 8000}
