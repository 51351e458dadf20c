"""synthetic/directions.py: back-translation, forward translation and distillation are records of
one shape, made into pairs by one engine. Distillation is forward translation of the training
sources: `tfm distill` (an alias of `tfm synthesize`) makes the student's corpus resumably, in
the same cache and folder, and the student is an ordinary tfm model."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from helpers import run_tfm, write_config, write_corpus

from transformer_cli.checkpoint import Checkpoint
from transformer_cli.config_loading import load_config
from transformer_cli.synthetic.corpora import PARALLEL
from transformer_cli.synthetic.directions import directions, makes_pairs, real_copies

TFM = [sys.executable, "-m", "transformer_cli"]


def student(work, corpus, teachers, data=None, **distill):
    return write_config(
        work / "student.yaml",
        work,
        corpus,
        data=data or {},
        distill={"teachers": [str(t) for t in teachers], "beam_size": 4, "chunk_lines": 10, **distill},
        synthetic={"cache_dir": str(work / "synthetic-cache")},
        train={"epochs": 2, "lr": 3e-3, "threads": 1},
    )


def sources(work):
    """A corpus of 120 training pairs for the students (the teacher was trained on 300)."""
    return write_corpus(work / "corpus", {"train": 120, "val": 20, "test_2016_flickr": 10})


def test_each_way_of_making_pairs_is_one_record(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", {"train": 10, "val": 5, "test_2016_flickr": 5}, gz=False)
    teacher = tmp_path / "t.pt"
    synthetic = {
        "back_translation": {"text": ["en.txt"], "model": "r.pt", "search": "noised_beam", "beam_size": 3},
        "forward_translation": {"text": ["de.txt"], "teachers": [str(teacher)], "tag": True, "max_lines": 7},
        "real_upsample": 3,
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
    assert makes_pairs(cfg) and real_copies(cfg) == 3
    distilled = load_config(str(student(tmp_path, corpus, [teacher], keep_original=True)))
    (distillation,) = directions(distilled)
    assert (distillation.text, distillation.key, distillation.models_key, distillation.chunk_lines) == (
        [PARALLEL],
        "distill",
        "distill.teachers",
        10,
    )
    assert distillation.search == {**forward.search, "beam_size": 4, "chunk_lines": 10}  # the teachers' beam
    assert makes_pairs(distilled) and real_copies(distilled) == 1  # keep_original: the real pairs once
    distilled.distill.keep_original = False
    assert real_copies(distilled) == 0
    plain = load_config(str(write_config(tmp_path / "plain.yaml", tmp_path, corpus)))
    assert not makes_pairs(plain) and directions(plain) == []


def _cache_rows(work) -> int:
    states = list((work / "synthetic-cache").glob("forward-*/cache.json"))
    return json.loads(states[0].read_text())["rows"] if states else 0


def test_distillation_resumes_to_the_same_bytes(trained, tmp_path):
    teachers = [trained["run"] / "published.pt"] * 2  # an ensemble: slower, and it must resume too
    corpus = sources(tmp_path)
    straight, killed, shared = (student(tmp_path / n, corpus, teachers) for n in ("straight", "killed", "shared"))
    r = run_tfm("distill", "-c", str(straight))
    assert r.returncode == 0, r.stderr
    r = run_tfm("distill", "-c", str(shared), "--nproc-per-node", "2")  # as tfm synthesize takes it
    assert r.returncode == 0, r.stderr
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
    kept = json.loads((a / "synthetic.json").read_text())["text"]["distillation"]["kept"]
    assert 0 < _cache_rows(tmp_path / "killed") < kept and not (b / "distillation.en").exists()
    r = run_tfm("distill", "-c", str(killed))
    assert r.returncode == 0, r.stderr
    assert (a / "distillation.en").read_bytes() == (b / "distillation.en").read_bytes()
    assert (a / "distillation.de").read_bytes() == (b / "distillation.de").read_bytes()
    c = tmp_path / "shared" / "data" / "student.synthetic"
    assert (a / "distillation.en").read_bytes() == (c / "distillation.en").read_bytes()
    assert len((a / "distillation.en").read_text().splitlines()) == kept


def test_a_tiny_distillation_end_to_end(trained, tmp_path):
    """A student keeping 65 of the 120 pairs (data.limit_train, for each source) and the original
    pairs too: the teacher translates 65 sources, and the student trains on 65 + 65 pairs."""
    teacher = trained["run"] / "published.pt"
    corpus = sources(tmp_path)
    cfg = student(tmp_path, corpus, [teacher], data={"limit_train": 65}, keep_original=True)
    r = run_tfm("train", "-c", str(cfg), "--quiet")  # makes the distilled corpus, then trains
    assert r.returncode == 0, r.stderr
    log = (tmp_path / "checkpoints" / "student" / "train.log").read_text()
    assert "distillation: translating 65 of 65 lines (0 already translated)" in log
    folder = tmp_path / "data" / "student.synthetic"
    sources_, targets = ((folder / f"distillation.{lang}").read_text().splitlines() for lang in ("de", "en"))
    assert len(sources_) == len(targets) == 65  # the teacher's 65, beside the original 65
    assert sources_ == (folder / "distillation.text").read_text().splitlines()
    r = run_tfm("translate", "--checkpoint", str(teacher), "--beam-size", "4", "--no-recase", *sources_[:5])
    assert r.stdout.splitlines() == targets[:5]  # what the teacher says, as it says it
    manifest = json.loads((tmp_path / "data" / "student" / "manifest.json").read_text())
    assert manifest["splits"]["train"]["pairs"] == 65 and manifest["parts"]["distillation"]["pairs"] == 65
    assert Checkpoint.read(tmp_path / "checkpoints" / "student" / "best.pt").metrics["epoch"] == 2
    r = run_tfm("export", "-c", str(cfg), "-o", str(tmp_path / "ct2"))  # an ordinary model
    assert r.returncode == 0, r.stderr
    r = run_tfm("train", "-c", str(cfg), "--quiet")  # nothing new: nothing translated again
    assert r.returncode == 0 and "already finished" in (tmp_path / "checkpoints" / "student" / "train.log").read_text()
