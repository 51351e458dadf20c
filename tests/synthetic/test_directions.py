"""synthetic/directions.py: back-translation and forward translation are records of one shape,
made into pairs by one engine. Distillation is forward translation of the training sources
(`parallel`): `tfm distill` (an alias of `tfm synthesize`) makes the student's corpus resumably,
in the same cache and folder, and the student is an ordinary tfm model."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
from helpers import run_tfm, write_config, write_corpus

from transformer_cli.checkpoint import Checkpoint
from transformer_cli.config_loading import load_config
from transformer_cli.seams import SEARCH_STRATEGIES
from transformer_cli.synthetic.corpora import PARALLEL
from transformer_cli.synthetic.directions import directions

TFM = [sys.executable, "-m", "transformer_cli"]


def student(work, corpus, teachers, data=None, keep_original=False):
    """A student of `teachers`: forward translation of its training sources, the real pairs
    once with `keep_original`, else not at all."""
    forward = {"text": [PARALLEL], "teachers": [str(t) for t in teachers], "beam_size": 4}
    return write_config(
        work / "student.yaml",
        work,
        corpus,
        data=data or {},
        synthetic={
            "forward_translation": forward,
            "chunk_lines": 10,
            "real_weight": 1 if keep_original else 0,
            "cache_dir": str(work / "synthetic-cache"),
        },
        train={"epochs": 2, "lr": 3e-3, "threads": 1},
    )


def old_student(work, corpus, teachers):
    """`student` as earlier versions wrote it: a distill: section."""
    distill = {"teachers": [str(t) for t in teachers], "beam_size": 4, "chunk_lines": 10}
    synthetic = {"cache_dir": str(work / "synthetic-cache")}
    train = {"epochs": 2, "lr": 3e-3, "threads": 1}
    return write_config(work / "student.yaml", work, corpus, distill=distill, synthetic=synthetic, train=train)


def sources(work):
    """A corpus of 120 training pairs for the students (the teacher was trained on 300)."""
    return write_corpus(work / "corpus", {"train": 120, "val": 20, "test_2016_flickr": 10})


def test_each_way_of_making_pairs_is_one_record(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", {"train": 10, "val": 5, "test_2016_flickr": 5}, gz=False)
    teacher = tmp_path / "t.pt"
    synthetic = {
        "back_translation": {"text": ["en.txt"], "model": "r.pt", "search": "noised_beam", "beam_size": 3},
        "forward_translation": {"text": ["de.txt"], "teachers": [str(teacher)], "tag": True, "max_lines": 7},
        "real_weight": 3,
    }
    cfg = load_config(str(write_config(tmp_path / "mix.yaml", tmp_path, corpus, synthetic=synthetic)))
    back, forward = directions(cfg)
    assert (back.name, back.languages, back.synthetic_side, back.kind, back.models_key) == (
        "back_translation",
        ("en", "de"),
        "src",
        "back",
        "synthetic.back_translation.model",
    )
    assert back.post is not None and back.search["beam_size"] == 3  # tags: training/mix_plan.py
    assert (forward.languages, forward.synthetic_side, forward.max_lines) == (("de", "en"), "tgt", 7)
    assert cfg.synthetic.enabled
    distilled = load_config(str(student(tmp_path, corpus, [teacher], keep_original=True)))
    (distillation,) = directions(distilled)  # forward translation of the training sources
    assert (distillation.name, distillation.text, distillation.models_key, distillation.chunk_lines) == (
        "forward_translation",
        [PARALLEL],
        "synthetic.forward_translation.teachers",
        10,
    )
    assert distillation.search == {**forward.search, "beam_size": 4, "chunk_lines": 10}  # the teachers' beam
    plain = load_config(str(write_config(tmp_path / "plain.yaml", tmp_path, corpus)))
    assert not plain.synthetic.enabled and directions(plain) == []


# configs/bt.yaml's back-translation search as the translation cache's identity recorded it
# before the search took its settings from synthetic.back_translation.search_options (issue 67):
# computed then, and kept, so that the caches users made stay current (synthetic/mixture.py)
BT_YAML_SEARCH = {
    "batch_size": 128,
    "beam_size": 1,
    "chunk_lines": 2000,
    "sampling_temperature": 1.0,
    "sampling_topk": 0,
    "search": "sample",
    "seed": 1,
}
BEAM = {"batch_size": 128, "beam_size": 5, "chunk_lines": 2000, "search": "beam", "seed": 1}
TOPK = ["synthetic.back_translation.sampling_topk=10", "synthetic.back_translation.sampling_temperature=0.7"]


@pytest.mark.parametrize(
    "overrides, identity",
    [
        ([], BT_YAML_SEARCH),
        (TOPK, {**BT_YAML_SEARCH, "sampling_topk": 10, "sampling_temperature": 0.7}),  # the old keys
        (
            ["synthetic.back_translation.search_options={topk: 10, temperature: 0.7}"],
            {**BT_YAML_SEARCH, "sampling_topk": 10, "sampling_temperature": 0.7},
        ),
        (["synthetic.back_translation.search_options={temperature: 1}"], BT_YAML_SEARCH),  # an int: the same
        (["synthetic.back_translation.search=beam"], BEAM),
        (
            ["synthetic.back_translation.search=beam", "synthetic.back_translation.beam_size=4"],
            {**BEAM, "beam_size": 4},
        ),
        (["synthetic.back_translation.search=noised_beam"], {**BEAM, "search": "noised_beam"}),
        (["synthetic.back_translation.search=greedy"], {**BEAM, "search": "greedy", "beam_size": 1}),
        ([*TOPK, "synthetic.back_translation.search=beam"], BEAM),  # ignored by beam, as before
    ],
)
def test_bt_yaml_back_translates_into_the_caches_it_made_before(overrides, identity):
    cfg = load_config("bt.yaml", ["synthetic.back_translation.model=r.pt", *overrides])
    back = directions(cfg)[0]
    assert back.search == identity
    decode = back.decode(cfg.decode)  # and searches as it did
    sampled = identity["search"] == "sample"
    expected = "sample" if sampled else "greedy" if identity["search"] == "greedy" else "auto"
    assert (decode.strategy, decode.beam_size, decode.batch_size) == (expected, identity["beam_size"], 128)
    if sampled:
        settings = SEARCH_STRATEGIES.options(decode.strategy, decode.strategy_options)
        assert (settings.topk, settings.temperature) == (identity["sampling_topk"], identity["sampling_temperature"])
    else:
        assert decode.strategy_options == {}


def _cache_rows(work) -> int:
    states = list((work / "synthetic-cache").glob("forward-*/cache.json"))
    return json.loads(states[0].read_text())["rows"] if states else 0


def test_distillation_resumes_to_the_same_bytes(trained, tmp_path):
    teachers = [trained["run"] / "published.pt"] * 2  # an ensemble: slower, and it must resume too
    corpus = sources(tmp_path)
    straight, killed = (student(tmp_path / n, corpus, teachers) for n in ("straight", "killed"))
    shared = old_student(tmp_path / "shared", corpus, teachers)  # distill: reads as those keys
    r = run_tfm("distill", "-c", str(straight))
    assert r.returncode == 0, r.stderr
    assert "the real pairs are not in the training corpus" not in r.stderr  # their sources are
    r = run_tfm("distill", "-c", str(shared), "--nproc-per-node", "2")  # as tfm synthesize takes it
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("distill is now forward translation of the training sources") == 1
    for sig, rows in ((signal.SIGKILL, 20), (signal.SIGTERM, 40)):
        proc = subprocess.Popen([*TFM, "distill", "-c", str(killed)], stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _cache_rows(tmp_path / "killed") < rows:
            time.sleep(0.01)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        if sig == signal.SIGTERM:
            assert proc.returncode == 143, err
            assert "the translations made so far are kept" in err.strip().splitlines()[-1]
    a, b = (tmp_path / n / "data" / "student.synthetic" for n in ("straight", "killed"))
    kept = json.loads((a / "synthetic.json").read_text())["text"]["forward_translation"]["kept"]
    assert 0 < _cache_rows(tmp_path / "killed") < kept and not (b / "forward_translation.en").exists()
    r = run_tfm("distill", "-c", str(killed))
    assert r.returncode == 0, r.stderr
    for name in ("forward_translation.en", "forward_translation.de"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    c = tmp_path / "shared" / "data" / "student.synthetic"
    assert (a / "forward_translation.en").read_bytes() == (c / "forward_translation.en").read_bytes()
    assert len((a / "forward_translation.en").read_text().splitlines()) == kept


def test_a_tiny_distillation_end_to_end(trained, tmp_path):
    """A student keeping 65 of the 120 pairs (data.limit_train, for each source) and the original
    pairs too: the teacher translates 65 sources, and the student trains on 65 + 65 pairs."""
    teacher = trained["run"] / "published.pt"
    corpus = sources(tmp_path)
    cfg = student(tmp_path, corpus, [teacher], data={"limit_train": 65}, keep_original=True)
    r = run_tfm("train", "-c", str(cfg), "--quiet")  # makes the distilled corpus, then trains
    assert r.returncode == 0, r.stderr
    log = (tmp_path / "checkpoints" / "student" / "train.log").read_text()
    assert "forward-translation: translating 65 of 65 lines (0 already translated)" in log
    folder = tmp_path / "data" / "student.synthetic"
    sources_, targets = ((folder / f"forward_translation.{lang}").read_text().splitlines() for lang in ("de", "en"))
    assert len(sources_) == len(targets) == 65  # the teacher's 65, beside the original 65
    assert sources_ == (folder / "forward_translation.text").read_text().splitlines()
    r = run_tfm("translate", "--checkpoint", str(teacher), "--beam-size", "4", "--no-recase", *sources_[:5])
    assert r.stdout.splitlines() == targets[:5]  # what the teacher says, as it says it
    manifest = json.loads((tmp_path / "data" / "student" / "manifest.json").read_text())
    assert manifest["splits"]["train"]["pairs"] == 65 and manifest["parts"]["forward_translation"]["pairs"] == 65
    assert Checkpoint.read(tmp_path / "checkpoints" / "student" / "best.pt").metrics["epoch"] == 2
    r = run_tfm("export", "-c", str(cfg), "-o", str(tmp_path / "ct2"))  # an ordinary model
    assert r.returncode == 0, r.stderr
    r = run_tfm("train", "-c", str(cfg), "--quiet")  # nothing new: nothing translated again
    assert r.returncode == 0 and "already finished" in (tmp_path / "checkpoints" / "student" / "train.log").read_text()
