"""The whole unattended loop: serve the published model, new data arrives, `tfm train` (as cron
runs it) trains a new run and promotes it, and the running server switches with no failed request."""

from __future__ import annotations

import json

from helpers import run_tfm, sentence_pairs, write_config, write_corpus
from reliability.cron_helpers import wait_until
from serving.serve_helpers import Load

from transformer_cli.checkpoint import read_payload


def test_serve_retrain_promote_switch(tmp_path, start_server):
    corpus = write_corpus(tmp_path / "corpus", {"train": 100, "val": 40, "test_2016_flickr": 40}, gz=False)
    config = write_config(
        tmp_path / "loop.yaml",
        tmp_path,
        corpus,  # weak on 100 pairs, good on 500
        model={"d_model": 64, "n_heads": 4, "d_ff": 128},
        train={
            "epochs": 6,
            "schedule": "inverse_sqrt",
            "schedule_options": {"warmup_steps": 30},
            "device": "cpu",
            "threads": 1,
        },
    )
    run = tmp_path / "checkpoints" / "loop"
    first = run_tfm("train", "-c", str(config), "--quiet")
    assert first.returncode == 0, first.stderr
    server = start_server("-c", str(config), "--set", "serve.threads=1", "--set", "serve.reload_poll_s=0.1")
    old = server.sha256()
    assert old == read_payload(run / "published.pt")["sha256"]
    with Load(server.url, clients=2) as load:
        new_pairs = sentence_pairs(400, seed=99)
        for lang, side in (("de", 0), ("en", 1)):
            with open(corpus / f"train.{lang}", "a", encoding="utf-8") as f:
                f.writelines(pair[side] + "\n" for pair in new_pairs)
        second = run_tfm("train", "-c", str(config), "--quiet")  # what the crontab line runs
        assert second.returncode == 0, second.stderr
        decision = json.loads((run / "promotions.log").read_text().splitlines()[-1])
        assert decision["decision"].startswith("promoted"), decision
        new = decision["candidate_sha256"]
        wait_until(lambda: server.sha256() == new, 30, "the server to switch", alive=server.tfm)
        target = len(load.replies) + 8
        wait_until(lambda: len(load.replies) >= target, 30, "replies from the new model", alive=server.tfm)
    assert server.stop() == 0
    assert not load.failures(), load.failures()[:3]
    assert load.shas() == {old, new}
    assert "hot reload: now serving " + new[:12] in server.tfm.stderr
