"""The shipped tiny.yaml end to end through the CLI on the real Multi30k (CI sets TFM_DATA_SOURCE)."""

import json

from helpers import run_tfm


def test_tiny_train_evaluate_translate(tmp_path, multi30k_dir):
    sets = [
        "--set",
        f"data.source={multi30k_dir}",
        "--set",
        f"data.dir={tmp_path}/data",
        "--set",
        f"train.out_dir={tmp_path}/checkpoints",
    ]
    r = run_tfm("train", "-c", "tiny.yaml", *sets, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Epoch: 02" in r.stderr and "promotion: promoted" in r.stderr
    run = tmp_path / "checkpoints" / "tiny"
    assert [json.loads(x)["epoch"] for x in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    r = run_tfm("evaluate", "-c", "tiny.yaml", *sets, "--split", "val", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["n_sentences"] == 1014
    r = run_tfm(
        "translate",
        "-c",
        "tiny.yaml",
        "--checkpoint",
        str(run / "published.pt"),
        "Ein Mann fährt Fahrrad.",
        cwd=tmp_path,
    )
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 1
