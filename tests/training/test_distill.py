"""training/distill.py: the teachers' translations of the training sources, made resumably,
become the corpus a student trains on; the student is an ordinary tfm model."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from helpers import run_tfm, sentence_pairs, write_config, write_corpus

from transformer_cli.checkpoint import Checkpoint
from transformer_cli.config_loading import load_config
from transformer_cli.training.distill import STATE, distilled_folder, training_corpus

TFM = [sys.executable, "-m", "transformer_cli"]


def student(work, corpus, teachers, data=None, **distill):
    return write_config(
        work / "student.yaml",
        work,
        corpus,
        data=data or {},
        distill={"teachers": [str(t) for t in teachers], "beam_size": 4, "chunk_lines": 10, **distill},
        train={"epochs": 2, "lr": 3e-3, "threads": 1},
    )


def sources(work):
    """A corpus of 120 training pairs for the students (the teacher was trained on 300)."""
    return write_corpus(work / "corpus", {"train": 120, "val": 20, "test_2016_flickr": 10})


def test_teacher_translation_resumes_to_the_same_bytes(trained, tmp_path):
    teachers = [trained["run"] / "published.pt"] * 2  # an ensemble: slower, and it must resume too
    corpus = sources(tmp_path)
    straight, killed = (student(tmp_path / n, corpus, teachers) for n in ("straight", "killed"))
    r = run_tfm("distill", "-c", str(straight))
    assert r.returncode == 0, r.stderr
    state = tmp_path / "killed" / "data" / "student.distilled" / "distill.json"
    for sig in (signal.SIGKILL, signal.SIGTERM):
        proc = subprocess.Popen([*TFM, "distill", "-c", str(killed)], stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
            not state.is_file() or json.loads(state.read_text())["lines"] < 40 * (1 + (sig == signal.SIGTERM))
        ):
            time.sleep(0.01)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        if sig == signal.SIGTERM:
            assert proc.returncode == 143, err
            assert "the translations made so far are kept" in err.strip().splitlines()[-1]
        done = json.loads(state.read_text())
        assert not done["complete"] and 0 < done["lines"] < 120
    r = run_tfm("distill", "-c", str(killed))
    assert r.returncode == 0, r.stderr
    a, b = (tmp_path / n / "data" / "student.distilled" for n in ("straight", "killed"))
    assert (a / "train.en").read_bytes() == (b / "train.en").read_bytes()
    assert (a / "train.de").read_bytes() == (b / "train.de").read_bytes()
    assert len((a / "train.en").read_text().splitlines()) == 120
    assert not list(b.glob("*.partial"))


def test_a_tiny_distillation_end_to_end(trained, tmp_path):
    """A student keeping 65 of the 120 pairs (data.limit_train) and the original pairs too: the
    teacher translates those 65 sources only, and the student trains on 65 + 65 pairs."""
    teacher = trained["run"] / "published.pt"
    corpus = sources(tmp_path)
    cfg = student(tmp_path, corpus, [teacher], data={"limit_train": 65}, keep_original=True)
    r = run_tfm("train", "-c", str(cfg), "--quiet")  # makes the distilled corpus, then trains
    assert r.returncode == 0, r.stderr
    assert (
        "distillation: translating 0 of 65 training sources"
        in (tmp_path / "checkpoints" / "student" / "train.log").read_text()
    )
    folder = tmp_path / "data" / "student.distilled"
    translations = (folder / "train.en").read_text().splitlines()
    assert len(translations) == 130  # the teacher's 65, then the original 65
    kept = sentence_pairs(120, seed=0)[:65]  # the first 65 of sources()' training pairs
    assert (folder / "train.de").read_text().splitlines() == [de for de, _ in kept] * 2
    assert translations[65:] == [en for _, en in kept]
    r = run_tfm(
        "translate",
        "--checkpoint",
        str(teacher),
        "--beam-size",
        "4",
        "--no-recase",
        *(folder / "train.de").read_text().splitlines()[:5],
    )
    assert r.stdout.splitlines() == translations[:5]  # what the teacher says, as it says it
    manifest = json.loads((tmp_path / "data" / "student" / "manifest.json").read_text())
    assert manifest["source"] == str(folder) and manifest["splits"]["train"]["pairs"] == 130
    best = Checkpoint.read(tmp_path / "checkpoints" / "student" / "best.pt")
    assert best.metrics["epoch"] == 2
    r = run_tfm("export", "-c", str(cfg), "-o", str(tmp_path / "ct2"))  # an ordinary model
    assert r.returncode == 0, r.stderr
    r = run_tfm("train", "-c", str(cfg), "--quiet")  # nothing new: nothing translated again
    assert (
        r.returncode == 0
        and "already finished" in (tmp_path / "checkpoints" / "student" / "train.log").read_text().splitlines()[-2]
    )


def test_the_corpus_is_the_teachers_translations_of_the_sources_then_the_originals(tmp_path):
    import torch
    from helpers import untrained_checkpoint

    from transformer_cli.data.sources import read_lines

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # (decoding a tiny model: more threads only wait for each other)
    corpus = write_corpus(tmp_path / "corpus", {"train": 24, "val": 6, "test_2016_flickr": 6})
    teacher = untrained_checkpoint(tmp_path / "teacher.pt")
    path = student(tmp_path, corpus, [teacher], beam_size=1, keep_original=True)
    cfg = load_config(str(path))
    try:
        plain = load_config(str(write_config(tmp_path / "plain.yaml", tmp_path, corpus)))
        assert training_corpus(plain) is plain  # no teachers: the corpus itself
        made = training_corpus(cfg)
    finally:
        torch.set_num_threads(threads)
    folder = distilled_folder(cfg)
    assert folder == tmp_path / "data" / "student.distilled" and made.data.source == str(folder)
    assert (made.data.corpus, made.data.splits.train, made.data.limit_train) == ("files", "train", None)
    sources, targets = read_lines(corpus / "train.de.gz"), read_lines(corpus / "train.en.gz")
    assert read_lines(folder / "train.de") == sources * 2
    distilled = read_lines(folder / "train.en")
    assert len(distilled) == 48 and distilled[24:] == targets  # keep_original: the pairs follow
    assert json.loads((folder / STATE).read_text())["complete"]
    before = (folder / "train.en").stat().st_mtime_ns
    training_corpus(cfg)  # complete: nothing is translated again
    assert (folder / "train.en").stat().st_mtime_ns == before
