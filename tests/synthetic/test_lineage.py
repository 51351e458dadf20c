"""synthetic/lineage.py: a model replaced at the same path (a re-published teacher) keeps the
earlier translations of the lines it had, refreshing one share of them per version, and
translates the new lines; `retranslate`, or a new version better on validation by the
margin, translates every line again. One log line says which."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys

import pytest
import torch
import yaml
from helpers import sentence_pairs, untrained_checkpoint, write_config, write_corpus

from transformer_cli.checkpoint import Checkpoint
from transformer_cli.config_loading import load_config
from transformer_cli.errors import TfmError
from transformer_cli.synthetic import cache_folders
from transformer_cli.synthetic.cache import TranslationCache
from transformer_cli.synthetic.lineage import chained
from transformer_cli.synthetic.mixture import STATE, synthesize, synthetic_folder
from transformer_cli.synthetic.text import line_key

SHORT = ["decode.max_len_b=4", "decode.max_len_a=0"]


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def publish(path, seed: int, bleu: float | None = None):
    """An untrained model at `path`, its weights drawn by `seed`, recording `bleu`."""
    untrained_checkpoint(path)
    checkpoint = Checkpoint.read(path)
    generator = torch.Generator().manual_seed(seed)
    checkpoint.weights = {k: torch.randn(v.shape, generator=generator) * 0.5 for k, v in checkpoint.weights.items()}
    checkpoint.metrics = {} if bleu is None else {"valid_bleu": bleu}
    checkpoint.write(path)


def setup(tmp_path, **synthetic):
    corpus = write_corpus(tmp_path / "corpus", {"train": 20, "val": 5, "test_2016_flickr": 5}, gz=False)
    german = tmp_path / "text.de"
    german.write_text("".join(f"{de} ({i})\n" for i, (de, _) in enumerate(sentence_pairs(12, seed=8))))
    section = {
        "forward_translation": {"text": [str(german)], "teachers": [str(tmp_path / "published.pt")], "beam_size": 1},
        "cache_dir": str(tmp_path / "cache"),
        **synthetic,
    }
    path = write_config(tmp_path / "ft.yaml", tmp_path, corpus, train={"threads": 1}, synthetic=section)
    return german, path


def translations(cfg) -> dict[int, str]:
    """The corpus's synthetic targets by their source line's key."""
    folder = synthetic_folder(cfg)
    text = (folder / "forward_translation.text").read_text().splitlines()
    targets = (folder / "forward_translation.en").read_text().splitlines()
    return {line_key(s): t for s, t in zip(text, targets)}


def cache_of(tmp_path, digest) -> dict[int, str]:
    (folder,) = [f for f in (tmp_path / "cache").glob("forward-*") if digest in (f / "cache.json").read_text()]
    state = json.loads((folder / "cache.json").read_text())
    cache = TranslationCache(folder, state["identity"])
    return dict(zip(cache.keys.tolist(), cache.translations(cache.keys)))


def test_a_replaced_teacher_keeps_earlier_lines_refreshes_a_share_and_translates_new_ones(tmp_path, one_thread, caplog):
    german, path = setup(tmp_path, refresh_share=0.5)
    publish(tmp_path / "published.pt", seed=1)
    cfg = load_config(str(path), SHORT)
    synthesize(cfg)
    first = Checkpoint.read(tmp_path / "published.pt").digest
    with open(german, "a") as f:
        f.write("Ein Hund rennt über die Wiese.\nZwei Kinder spielen im Schnee.\n")
    publish(tmp_path / "published.pt", seed=2)  # re-published at the same path
    second = Checkpoint.read(tmp_path / "published.pt").digest
    with caplog.at_level(logging.INFO, logger="tfm"):
        synthesize(cfg)
    old, new = cache_of(tmp_path, first), cache_of(tmp_path, second)
    refreshed = [k for k in old if k % 2 == 1]  # version 2 of 2 buckets: the odd keys
    assert len(old) == 12 and set(new) == {
        *refreshed,
        line_key("Ein Hund rennt über die Wiese."),
        line_key("Zwei Kinder spielen im Schnee."),
    }
    assert (
        f"was replaced (version 2 of these models and search; no validation BLEU recorded to compare): "
        f"earlier translations kept for {12 - len(refreshed)} lines, {len(refreshed)} refreshed "
        "(synthetic.refresh_share=0.5), 2 new"
    ) in caplog.text
    corpus = translations(cfg)
    assert corpus == {k: new.get(k, old.get(k)) for k in corpus}  # the newest version's, else the earlier
    state = json.loads((synthetic_folder(cfg) / STATE).read_text())
    assert state["translated"]["forward_translation"]["lines"] == len(refreshed) + 2
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tfm"):
        synthesize(cfg)  # the next night, nothing new: nothing translated, nothing to say
    assert "was replaced" not in caplog.text and translations(cfg) == corpus


@pytest.mark.parametrize("why", ["retranslate", "improved"])
def test_every_line_again_when_asked_or_when_the_new_version_is_better_by_the_margin(tmp_path, one_thread, why):
    german, path = setup(tmp_path, republished="retranslate" if why == "retranslate" else "keep")
    publish(tmp_path / "published.pt", seed=1, bleu=30.0)
    cfg = load_config(str(path), SHORT)
    synthesize(cfg)
    publish(tmp_path / "published.pt", seed=2, bleu=31.5 if why == "improved" else 30.2)
    synthesize(cfg)
    second = Checkpoint.read(tmp_path / "published.pt").digest
    assert len(cache_of(tmp_path, second)) == 12
    assert translations(cfg) == cache_of(tmp_path, second)


def test_each_line_is_read_from_the_newest_version_that_has_it(tmp_path):
    import numpy as np

    newer, older = TranslationCache(tmp_path / "new", {"v": 2}), TranslationCache(tmp_path / "old", {"v": 1})
    older.append(np.array([1, 2, 3], dtype=np.uint64), ["one (old)", "two (old)", "three (old)"])
    newer.append(np.array([2, 4], dtype=np.uint64), ["two (new)", "four (new)"])
    keys = np.array([4, 3, 2, 1], dtype=np.uint64)
    assert list(chained([newer, older], keys)) == ["four (new)", "three (old)", "two (new)", "one (old)"]
    with pytest.raises(TfmError, match="lines missing from the translation caches"):
        list(chained([newer, older], np.array([5], dtype=np.uint64)))


def test_a_night_opens_only_the_versions_that_can_still_hold_a_lines_newest_translation(tmp_path, one_thread):
    """With refresh_share 0.5 two versions in a row refresh every line: the fourth version reads
    the second's and third's caches and never opens the first's (damaged here: opening it fails)."""
    _, path = setup(tmp_path, refresh_share=0.5)
    cfg = load_config(str(path), SHORT)
    digests = []
    for seed in (1, 2, 3):
        publish(tmp_path / "published.pt", seed=seed)
        digests.append(Checkpoint.read(tmp_path / "published.pt").digest)
        synthesize(cfg)
    (first,) = [f for f in (tmp_path / "cache").glob("forward-*") if digests[0] in (f / "cache.json").read_text()]
    state = json.loads((first / "cache.json").read_text())
    (first / "cache.json").write_text(json.dumps({**state, "rows": -1}))
    publish(tmp_path / "published.pt", seed=4)
    synthesize(cfg)
    latest = cache_of(tmp_path, Checkpoint.read(tmp_path / "published.pt").digest)
    assert 0 < len(latest) < 12  # a bucket refreshed, the rest read from versions 2 and 3
    second, third, corpus = cache_of(tmp_path, digests[1]), cache_of(tmp_path, digests[2]), translations(cfg)
    assert len(corpus) == 12 and corpus == {k: latest.get(k, third.get(k, second.get(k))) for k in corpus}


# -- pruning: what stays on disk ----------------------------------------------------------


def forward_caches(tmp_path) -> set[str]:
    return {f.name for f in (tmp_path / "cache").iterdir() if f.is_dir() and f.name.startswith("forward-")}


def listed(tmp_path, teacher="published.pt") -> list[dict]:
    """The versions the lineage file of `teacher` lists."""
    for path in (tmp_path / "cache" / "lineages").glob("forward-*.json"):
        lineage = json.loads(path.read_text())
        if lineage["paths"] == [str((tmp_path / teacher).resolve())]:
            return lineage["versions"]
    raise AssertionError(f"no lineage of {teacher}")


def folder_of(tmp_path, digest) -> str:
    (name,) = [n for n in forward_caches(tmp_path) if digest in (tmp_path / "cache" / n / "cache.json").read_text()]
    return name


def pairs(cfg) -> dict[int, str]:
    """The corpus's synthetic targets by their source's key (a line translated as nothing
    makes no pair)."""
    folder = synthetic_folder(cfg)
    sources = (folder / "forward_translation.de").read_text().splitlines()
    targets = (folder / "forward_translation.en").read_text().splitlines()
    return {line_key(s): t for s, t in zip(sources, targets, strict=True)}


def night(tmp_path, cfg, seed: int) -> str:
    """The teacher re-published (weights drawn by `seed`), then a night: its digest."""
    publish(tmp_path / "published.pt", seed=seed)
    synthesize(cfg)
    return Checkpoint.read(tmp_path / "published.pt").digest


def test_sixty_nightly_versions_leave_the_newest_five_caches_and_read_each_lines_newest(tmp_path, one_thread, caplog):
    """refresh_share 0.25: four versions in a row refresh every line, so a night reads its own
    and the four before; older caches are pruned as each version comes, the buckets go on
    rotating across the pruned numbers, and every line is read from its newest translation."""
    german, path = setup(tmp_path, refresh_share=0.25)
    cfg = load_config(str(path), SHORT)
    added = {line_key(line): 1 for line in german.read_text().splitlines()}
    newest = {}  # each line's newest translation, as its version's cache holds it
    for number in range(1, 61):
        if number % 15 == 0:  # a new line now and then
            line = f"Ein Hund rennt über die Wiese, Nacht {number}."
            with open(german, "a") as f:
                f.write(f"{line}\n")
            added[line_key(line)] = number
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="tfm"):
            digest = night(tmp_path, cfg, seed=number)
        mine = cache_of(tmp_path, digest)
        due = {k for k, a in added.items() if a == number or (number > 1 and k % 4 == (number - 1) % 4)}
        assert set(mine) == due, number  # the new lines and this version's bucket: nothing else
        newest.update(mine)
        assert pairs(cfg) == {k: newest[k] for k in added if newest[k]}, number
        state = json.loads((synthetic_folder(cfg) / STATE).read_text())
        assert state["translated"]["forward_translation"]["lines"] == len(due)
        assert len(forward_caches(tmp_path)) == min(number, 5), number
        assert [v["number"] for v in listed(tmp_path)] == list(range(max(1, number - 4), number + 1))
        if number > 5:
            assert "older caches pruned" in caplog.text
            (line,) = [r.getMessage() for r in caplog.records if "older caches pruned" in r.getMessage()]
            assert line.startswith("lineage forward-") and ": 1 older caches pruned (" in line
    assert not list((tmp_path / "cache").glob(".pruned-*"))


@pytest.mark.parametrize(
    ("settings", "on_disk", "keeps"),
    [
        ({"refresh_share": 0.5}, 3, 2),
        ({"republished": "retranslate"}, 1, 0),  # reads no earlier version
        ({"refresh_share": 0.0}, 5, None),  # none refreshed: any earlier version may hold a line's newest
        ({"refresh_share": 0.5, "prune_lineage": False}, 5, None),
    ],
)
def test_what_each_rule_keeps_on_disk(tmp_path, one_thread, settings, on_disk, keeps):
    _, path = setup(tmp_path, **settings)
    cfg = load_config(str(path), SHORT)
    newest = {}
    for seed in range(1, 6):
        newest.update(cache_of(tmp_path, night(tmp_path, cfg, seed)))
    assert len(forward_caches(tmp_path)) == on_disk
    assert [(v["number"], v["keeps"]) for v in listed(tmp_path)] == [(n, keeps) for n in range(6 - on_disk, 6)]
    assert pairs(cfg) == {k: t for k, t in newest.items() if t}


def test_a_cache_another_lineage_reads_is_kept_on_disk(tmp_path, one_thread, caplog):
    """A config whose fixed teacher is the first version's model (the same digest: the same
    cache folder) keeps that cache when the re-published teacher's lineage drops it."""
    _, path = setup(tmp_path, refresh_share=0.5)
    cfg = load_config(str(path), SHORT)
    publish(tmp_path / "published.pt", seed=1)
    shutil.copy(tmp_path / "published.pt", tmp_path / "fixed.pt")
    synthesize(cfg)
    first = folder_of(tmp_path, Checkpoint.read(tmp_path / "fixed.pt").digest)
    raw = yaml.safe_load(path.read_text())
    raw["synthetic"]["forward_translation"]["teachers"] = [str(tmp_path / "fixed.pt")]
    (tmp_path / "fixed.yaml").write_text(yaml.safe_dump({**raw, "name": "fixed"}))
    fixed = load_config(str(tmp_path / "fixed.yaml"), SHORT)
    synthesize(fixed)  # fixed.pt's lineage: one version, the same cache, nothing translated
    later = [folder_of(tmp_path, night(tmp_path, cfg, seed)) for seed in range(2, 7)]
    assert forward_caches(tmp_path) == {first, *later[-3:]}  # versions 2 and 3 pruned, 1 kept
    assert [v["cache"] for v in listed(tmp_path)] == later[-3:]
    assert [v["cache"] for v in listed(tmp_path, "fixed.pt")] == [first]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tfm"):
        synthesize(fixed)
    assert "translating" not in caplog.text
    assert pairs(fixed) == {
        k: t for k, t in cache_of(tmp_path, Checkpoint.read(tmp_path / "fixed.pt").digest).items() if t
    }


def test_a_folder_a_crash_left_half_pruned_is_never_read_and_removed_by_the_next_night(
    tmp_path, one_thread, monkeypatch
):
    _, path = setup(tmp_path, refresh_share=0.5)
    cfg = load_config(str(path), SHORT)
    digests = [night(tmp_path, cfg, seed) for seed in (1, 2, 3)]
    newest = {k: t for d in digests for k, t in cache_of(tmp_path, d).items()}
    first = folder_of(tmp_path, digests[0])

    def killed(folder):
        (folder / "lines.txt").unlink()  # half deleted, then the process dies
        raise KeyboardInterrupt

    monkeypatch.setattr(cache_folders, "_delete", killed)
    with pytest.raises(KeyboardInterrupt):
        night(tmp_path, cfg, seed=4)  # prunes version 1: renamed away, then killed
    monkeypatch.undo()
    (left,) = (tmp_path / "cache").glob(".pruned-*")
    assert left.name.startswith(f".pruned-{first}-") and first not in forward_caches(tmp_path)
    assert first in [v["cache"] for v in listed(tmp_path)]  # still listed: the kill came first
    synthesize(cfg)  # the same night again: version 4 is known, the leftover removed
    assert not list((tmp_path / "cache").glob(".pruned-*"))
    latest = cache_of(tmp_path, Checkpoint.read(tmp_path / "published.pt").digest)
    assert 0 < len(latest) < 12 and pairs(cfg) == {k: t for k, t in {**newest, **latest}.items() if t}
    night(tmp_path, cfg, seed=5)  # the next version prunes version 2 and drops version 1's entry
    assert len(forward_caches(tmp_path)) == 3 and [v["number"] for v in listed(tmp_path)] == [3, 4, 5]


HOLDER = """
import sys
from pathlib import Path
from transformer_cli.synthetic.cache import TranslationCache
cache = TranslationCache.existing(Path(sys.argv[1]))
print("held" if cache is not None else "gone", flush=True)
sys.stdin.readline()
print(len(list(cache.translations(cache.keys))), flush=True)
"""


def test_a_cache_another_process_has_open_is_pruned_only_once_it_is_let_go(tmp_path, one_thread, caplog):
    _, path = setup(tmp_path, refresh_share=0.5)
    cfg = load_config(str(path), SHORT)
    first = folder_of(tmp_path, night(tmp_path, cfg, seed=1))
    for seed in (2, 3):
        night(tmp_path, cfg, seed)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "cache" / first)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with caplog.at_level(logging.INFO, logger="tfm"):
            night(tmp_path, cfg, seed=4)  # version 1 is out of reach, but open in the holder
        assert "0 older caches pruned (0.0 MB), 1 kept while another process has them open" in caplog.text
        assert first in forward_caches(tmp_path) and first in [v["cache"] for v in listed(tmp_path)]
        out, _ = holder.communicate("\n", timeout=60)
        assert holder.returncode == 0 and out.split() == ["12"]  # read whole, as it was
    finally:
        holder.kill()
        holder.wait()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tfm"):
        night(tmp_path, cfg, seed=5)
    assert ": 2 older caches pruned (" in caplog.text
    assert first not in forward_caches(tmp_path) and len(forward_caches(tmp_path)) == 3


def test_two_configs_of_one_lineage_run_at_once_prune_once_and_read_every_newest_line(tmp_path, one_thread):
    """Two configs sharing the cache_dir and the teacher, run at once on a night (two `tfm
    synthesize` processes): one adds the version and prunes while the other reads the earlier
    caches; both corpora hold each line's newest translation, the disk the newest three."""
    _, path = setup(tmp_path, refresh_share=0.5)
    twin = tmp_path / "twin.yaml"
    twin.write_text(yaml.safe_dump({**yaml.safe_load(path.read_text()), "name": "twin"}))
    configs = [load_config(str(path), SHORT), load_config(str(twin), SHORT)]
    newest = {}
    for seed in (1, 2, 3):
        newest.update(cache_of(tmp_path, night(tmp_path, configs[0], seed)))
    overrides = [arg for setting in SHORT for arg in ("--set", setting)]
    publish(tmp_path / "published.pt", seed=4)  # a night with a cache to prune (version 1)
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "transformer_cli", "synthesize", "-c", str(c), *overrides],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for c in (path, twin)
    ]
    logs = [run.communicate(timeout=300)[1] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], logs
    assert sum(": 1 older caches pruned (" in log for log in logs) == 1  # by the one that added it
    newest.update(cache_of(tmp_path, Checkpoint.read(tmp_path / "published.pt").digest))
    assert len(forward_caches(tmp_path)) == 3 and not list((tmp_path / "cache").glob(".pruned-*"))
    for cfg in configs:
        assert pairs(cfg) == {k: t for k, t in newest.items() if t}
