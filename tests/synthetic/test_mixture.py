"""synthetic/mixture.py, the training pairs of a config with monolingual text: back- and
forward-translated pairs, each a part of the prepared folder, mixed with the real pairs
(upsampled) and tagged when batches are drawn; made again only when their inputs change.
End to end (slow): the reverse model is an ordinary run of the same config (`--reverse`), back-
and forward translations are made resumably and kept by line, so a second night translates
only its new lines; cleaning drops and counts lines equal to a val/test sentence; the tag of
synthetic sources never reaches users."""

from __future__ import annotations

import gzip
import json
import logging
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import run_tfm, sentence_pairs, write_config, write_corpus

import transformer_cli as tfm
from transformer_cli.config_loading import load_config
from transformer_cli.errors import UsageError
from transformer_cli.synthetic.mixture import (
    STATE,
    synthesize,
    synthetic_folder,
    synthetic_parts,
)
from transformer_cli.tokenizers.text_marks import BACK_TRANSLATION_TAG, FORWARD_TRANSLATION_TAG
from transformer_cli.training.run_data import data_identity, prepare_run_data, training_split

TFM = [sys.executable, "-m", "transformer_cli"]
TRAIN = {"epochs": 2, "lr": 3e-3, "threads": 1, "batch_size": 32}


def pair_files(folder):
    """The names of the pair files in a synthetic folder (two per direction)."""
    names = sorted(p.name for p in folder.iterdir() if p.name.endswith((".de", ".en")))
    assert names and len(names) % 2 == 0
    return names


def monolingual(folder, lang, n, seed, extra=()):
    """n sentences of one language (pairs of another seed than the corpus's), then `extra`."""
    side = 0 if lang == "de" else 1
    lines = [p[side] for p in sentence_pairs(n, seed=seed)] + list(extra)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"captions.{lang}"
    path.write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A corpus, a forward and a reverse model trained on it, and English and German text."""
    work = tmp_path_factory.mktemp("synthetic")
    corpus = write_corpus(work / "corpus", {"train": 200, "val": 20, "test_2016_flickr": 10})
    val_en = gzip.decompress((corpus / "val.en.gz").read_bytes()).decode().splitlines()
    english = monolingual(
        work / "text", "en", 90, seed=7, extra=["", val_en[0].lower().rstrip("."), "a " * 60, "A dog runs."]
    )
    german = monolingual(work / "text", "de", 60, seed=8)
    forward = write_config(work / "fwd.yaml", work, corpus, train=TRAIN)
    for reverse in ((), ("--reverse",)):
        r = run_tfm("train", "-c", str(forward), "--quiet", *reverse)
        assert r.returncode == 0, r.stderr
    return {
        "work": work,
        "corpus": corpus,
        "english": english,
        "german": german,
        "teacher": work / "checkpoints" / "fwd" / "best.pt",
        "reverse": work / "checkpoints" / "fwd.reverse" / "best.pt",
    }


def bt_config(world, where, forward=True, **back):
    """Back-translation of the English text (its folder) by sampling (`back` changes it), and
    forward translation of the German text by the forward model unless `forward` is off."""
    section = {
        "back_translation": {"text": [str(world["english"].parent)], "search": "sample", **back},
        "chunk_lines": 16,
        "real_weight": 2,
        "cache_dir": str(where / "cache"),
    }
    if forward:
        section["forward_translation"] = {
            "text": [str(world["german"])],
            "teachers": [str(world["teacher"])],
            "beam_size": 2,
        }
    return write_config(where / "bt.yaml", where, world["corpus"], train=TRAIN, synthetic=section)


@pytest.mark.slow
def test_back_and_forward_translation_end_to_end(world, tmp_path):
    cfg = bt_config(world, tmp_path)
    r = run_tfm("train", "-c", str(cfg), "--quiet")  # no reverse model yet: one line, exit 2
    assert r.returncode == 2 and "train it first with" in r.stderr and len(r.stderr.splitlines()) == 1
    r = run_tfm("train", "-c", str(cfg), "--reverse", "--quiet")
    assert r.returncode == 0, r.stderr
    reverse = (tmp_path / "checkpoints" / "bt.reverse" / "config.yaml").read_text()
    assert "src_lang: en" in reverse and "tgt_lang: de" in reverse and "text: []" in reverse
    r = run_tfm("train", "-c", str(cfg))
    assert r.returncode == 0, r.stderr
    folder = tmp_path / "data" / "bt.synthetic"
    state = json.loads((folder / "synthetic.json").read_text())
    bt = state["text"]["back_translation"]
    # English: 94 lines read; the empty one, the 60-word one, the lines equal to a val or test
    # sentence (one planted lowercased, without its full stop; the toy grammar repeats others)
    # and repeated lines dropped, and counted in the log.
    assert (bt["read"], bt["empty"], bt["too_long"]) == (94, 1, 1) and bt["in_val_or_test"] >= 1
    assert bt["kept"] == 94 - 2 - bt["in_val_or_test"] - bt["duplicates"]
    assert (
        f"94 lines read, {bt['kept']} kept; dropped: 1 empty, 1 too long, {bt['in_val_or_test']} equal "
        "to a val/test sentence"
    ) in r.stderr
    made = {part: state["text"][part]["kept"] - state["translated"][part]["empty"] for part in state["text"]}
    sources, targets = ((folder / f"back_translation.{lang}").read_text().splitlines() for lang in ("de", "en"))
    assert len(sources) == len(targets) == made["back_translation"]
    assert all(s.strip() for s in sources)  # no empty source: a line translated as nothing makes no pair
    assert not any(BACK_TRANSLATION_TAG in s for s in sources)  # tagged when batches are drawn
    english = [x.strip() for x in world["english"].read_text().splitlines()]
    assert set(targets) <= set(english)  # the text is the target side
    assert english[91] not in targets  # the planted val sentence
    manifest = json.loads((tmp_path / "data" / "bt" / "manifest.json").read_text())
    # every pair encoded, but those preprocessing leaves out (a side past data.train_max_len)
    assert {name: part["pairs"] + part["too_long"] for name, part in manifest["parts"].items()} == made
    # The model was trained on tagged sources; a tag in a user's input is no input.
    model = tfm.load(tmp_path / "checkpoints" / "bt" / "best.pt")
    line = "Ein Hund läuft im Park."
    assert model.translate([BACK_TRANSLATION_TAG + " " + line]) == model.translate([line])


@pytest.mark.slow
def test_a_killed_synthesis_resumes_to_the_same_bytes_and_new_lines_alone_are_translated(world, tmp_path):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    for where in (straight, killed):  # any model will do to back-translate here
        bt_config(world, where, forward=False, model=str(world["reverse"]))
    r = run_tfm("synthesize", "-c", str(straight / "bt.yaml"))
    assert r.returncode == 0, r.stderr
    cache = next((killed / "cache").glob("back-*"), None)
    proc = subprocess.Popen([*TFM, "synthesize", "-c", str(killed / "bt.yaml")], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        cache = next((killed / "cache").glob("back-*"), None)
        if (
            cache is not None
            and (cache / "cache.json").is_file()
            and json.loads((cache / "cache.json").read_text())["rows"] >= 32
        ):
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    state = json.loads((straight / "data" / "bt.synthetic" / "synthetic.json").read_text())
    kept, empty = state["text"]["back_translation"]["kept"], state["translated"]["back_translation"]["empty"]
    assert cache is not None and json.loads((cache / "cache.json").read_text())["rows"] < kept
    r = run_tfm("synthesize", "-c", str(killed / "bt.yaml"))
    assert r.returncode == 0, r.stderr
    a, b = (w / "data" / "bt.synthetic" for w in (straight, killed))
    for name in pair_files(a):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    # The next night: three new lines, three translations.
    with open(world["english"], "a", encoding="utf-8") as f:
        f.write("A cat sleeps on a red sofa.\nTwo children play in the snow.\nA man rides a horse.\n")
    try:
        r = run_tfm("synthesize", "-c", str(straight / "bt.yaml"))
        assert r.returncode == 0, r.stderr
        assert f"translating 3 of {kept + 3} lines ({kept} already translated)" in r.stderr
        empty = json.loads((a / "synthetic.json").read_text())["translated"]["back_translation"]["empty"]
        assert len((a / "back_translation.en").read_text().splitlines()) == kept + 3 - empty
    finally:
        lines = world["english"].read_text().splitlines()[:-3]
        world["english"].write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")


@pytest.mark.slow
def test_monolingual_text_that_is_not_utf8_is_one_line_and_nothing_is_made(world, tmp_path):
    bad = tmp_path / "text" / "bad.en"
    bad.parent.mkdir()
    bad.write_bytes(b"A dog runs.\nA cat \xff sleeps.\n")
    cfg = bt_config(world, tmp_path, forward=False, text=[str(bad)], model=str(world["reverse"]))
    r = run_tfm("synthesize", "-c", str(cfg))
    assert r.returncode == 2 and r.stderr.strip() == f"tfm: error: {bad}:2: not valid UTF-8 (byte 0xff at column 7)"
    assert not (tmp_path / "data" / "bt.synthetic" / "back_translation.en").exists()


def reversed_checkpoint(path):
    """The checkpoint at `path`, its config saying it translates en->de."""
    from transformer_cli.checkpoint import Checkpoint

    checkpoint = Checkpoint.read(path)
    checkpoint.config["data"].update(src_lang="en", tgt_lang="de")
    checkpoint.write(path)
    return path


@pytest.fixture
def restored_threads():
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_the_mix_is_real_pairs_upsampled_then_tagged_synthetic_pairs_each_encoded_once(
    tmp_path, restored_threads, caplog
):
    from helpers import untrained_checkpoint

    corpus = write_corpus(tmp_path / "corpus", {"train": 30, "val": 5, "test_2016_flickr": 5}, gz=False)
    model = untrained_checkpoint(tmp_path / "m.pt")
    reverse = reversed_checkpoint(untrained_checkpoint(tmp_path / "r.pt"))
    english = monolingual(tmp_path / "text", "en", 12, seed=7)
    german = monolingual(tmp_path / "text", "de", 8, seed=8)
    section = {
        "back_translation": {"text": [str(english)], "model": str(reverse), "search": "beam", "beam_size": 1},
        "forward_translation": {"text": [str(german)], "teachers": [str(model)], "beam_size": 1, "tag": True},
        "real_weight": 2,
        "cache_dir": str(tmp_path / "cache"),
    }
    path = write_config(tmp_path / "mix.yaml", tmp_path, corpus, train={"threads": 1}, synthetic=section)
    settings = ["decode.max_len_b=4", "decode.max_len_a=0", "data.min_train_pairs=30", "data.train_max_len=250"]
    cfg = load_config(str(path), settings)
    plain = load_config(str(write_config(tmp_path / "plain.yaml", tmp_path, corpus)))
    assert synthetic_parts(plain) == []  # no monolingual text: the corpus alone
    parts = synthetic_parts(cfg)
    folder = synthetic_folder(cfg)
    assert folder == tmp_path / "data" / "mix.synthetic"
    assert [(p.name, p.paths) for p in parts] == [
        (name, (folder / f"{name}.de", folder / f"{name}.en")) for name in ("back_translation", "forward_translation")
    ]
    state = json.loads((folder / STATE).read_text())
    bt, ft = state["text"]["back_translation"]["kept"], state["text"]["forward_translation"]["kept"]
    bt_de, bt_en = ((folder / f"back_translation.{lang}").read_text().splitlines() for lang in ("de", "en"))
    assert len(bt_de) == len(bt_en) == bt and bt_en == (folder / "back_translation.text").read_text().splitlines()
    assert not any(BACK_TRANSLATION_TAG in line for line in bt_de)  # the tag is no text: a transform
    ft_de = (folder / "forward_translation.de").read_text().splitlines()
    assert ft_de == (folder / "forward_translation.text").read_text().splitlines()  # the text: sources

    prepared, rebuilt = prepare_run_data(cfg)
    assert rebuilt and set(prepared.manifest.parts) == {"back_translation", "forward_translation"}
    assert prepared.manifest.training_pairs == 30 + bt + ft
    mixed = training_split(cfg, prepared)
    real_de, real_en = ((corpus / f"train.{lang}").read_text().splitlines() for lang in ("de", "en"))
    lines = [mixed.lines(i) for i in range(len(mixed))]
    assert len(mixed) == 2 * 30 + bt + ft and [x for x, _ in lines[:60]] == real_de * 2
    assert [y for _, y in lines[:60]] == real_en * 2
    assert [x for x, _ in lines[60 : 60 + bt]] == [f"{BACK_TRANSLATION_TAG} {x}" for x in bt_de]
    assert [x for x, _ in lines[60 + bt :]] == [f"{FORWARD_TRANSLATION_TAG} {x}" for x in ft_de]
    # The ids are those of the tagged text encoded whole, as a corpus written out would give.
    src = prepared.tokenizers.src
    for i in (0, 60, 60 + bt):
        assert mixed.pair(i)[0].tolist() == src.encode_batch([lines[i][0]])[0]
    assert len(mixed.src_lengths) == len(mixed) and int(mixed.src_lengths[60]) == len(mixed.pair(60)[0])
    assert prepared.tokenizers.src.id_to_token(mixed.pair(60)[0][:1].tolist()) == [f"\u2581{BACK_TRANSLATION_TAG}"]

    made = [*(folder / f"{p.name}.{lang}" for p in parts for lang in ("de", "en")), *cfg.data_dir.iterdir()]
    before = {p: p.stat().st_mtime_ns for p in made}
    cfg.synthetic.real_weight = 1  # a ratio and a tag change: nothing made, nothing encoded
    cfg.synthetic.back_translation.tag = False
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tfm"):
        again, rebuilt = prepare_run_data(cfg)
    assert not rebuilt and {p: p.stat().st_mtime_ns for p in made} == before
    assert "synthetic pairs up to date" in caplog.text and "encoded" not in caplog.text
    mixed = training_split(cfg, again)
    assert len(mixed) == 30 + bt + ft and mixed.lines(30)[0] == bt_de[0]
    assert data_identity(cfg, again) != data_identity(load_config(str(path), settings), again)  # another run

    # A night: new lines at the end of the text; only their pairs are translated and encoded.
    with open(english, "a", encoding="utf-8") as f:
        f.write("A cat sleeps on a red sofa.\nTwo children play in the snow.\n")
    shard = cfg.data_dir / "back_translation.00000.src.bin"
    inode = shard.stat().st_ino
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tfm"):
        night, rebuilt = prepare_run_data(cfg)
    assert rebuilt and "translating 2 of" in caplog.text
    assert f"back_translation: 2 new pairs encoded, {bt} kept as they were" in caplog.text
    assert "forward_translation: 0 new pairs encoded" in caplog.text
    assert shard.stat().st_ino == inode  # the earlier shard kept, not written again
    assert night.manifest.shards["back_translation"][0] == bt and len(night.manifest.shards["back_translation"]) == 2
    assert night.manifest.shards["train"] == prepared.manifest.shards["train"]
    mixed = training_split(cfg, night)
    assert [mixed.lines(i)[1] for i in range(30 + bt, 30 + bt + 2)] == [
        "A cat sleeps on a red sofa.",
        "Two children play in the snow.",
    ]
    from transformer_cli.data.prepared import verify_folder

    assert verify_folder(cfg.data_dir, night.manifest, full=True) is None
    # The same folder built from nothing holds the same ids (with the tags the folder was fitted
    # for: a vocabulary fitted anew reserves only the marks the mix writes).
    cfg.synthetic.back_translation.tag = True
    mixed = training_split(cfg, night)
    whole, _ = prepare_run_data(cfg, force=True)
    fresh = training_split(cfg, whole)
    assert [fresh.pair(i)[0].tolist() for i in range(len(fresh))] == [
        p.tolist() for p in (mixed.pair(i)[0] for i in range(len(mixed)))
    ]


@pytest.mark.slow
@pytest.mark.parametrize("runs", [2, 3])
def test_concurrent_synthesize_runs_on_one_cache_give_the_corpus_one_run_gives(world, tmp_path, runs):
    """`runs` processes at once: two of one config (the second waits for the first, then finds
    the folder current), the others of configs of their own, sharing the translation cache."""
    alone, shared = tmp_path / "alone", tmp_path / "shared"
    bt_config(world, alone, forward=False, model=str(world["reverse"]))
    r = run_tfm("synthesize", "-c", str(alone / "bt.yaml"), "--quiet")
    assert r.returncode == 0, r.stderr
    configs = [bt_config(world, shared, forward=False, model=str(world["reverse"]))] * 2
    for i in range(2, runs):
        configs.append(shared / f"bt{i}.yaml")
        configs[-1].write_text((shared / "bt.yaml").read_text().replace("name: bt\n", f"name: bt{i}\n"))
    running = [
        subprocess.Popen([*TFM, "synthesize", "-c", str(c), "--quiet"], stderr=subprocess.PIPE, text=True)
        for c in configs
    ]
    errors = [p.communicate(timeout=300)[1] for p in running]
    assert [p.returncode for p in running] == [0] * runs, errors
    expected = {
        name: (alone / "data" / "bt.synthetic" / name).read_bytes()
        for name in pair_files(alone / "data" / "bt.synthetic")
    }
    for c in configs:
        folder = shared / "data" / f"{c.stem}.synthetic"
        assert {name: (folder / name).read_bytes() for name in expected} == expected
    (cache,) = (shared / "cache").glob("back-*")
    kept = json.loads((alone / "data" / "bt.synthetic" / "synthetic.json").read_text())["text"]["back_translation"]
    assert json.loads((cache / "cache.json").read_text())["rows"] == kept["kept"]  # each line once


@pytest.mark.slow
def test_limit_train_applies_to_each_source_and_translates_no_more(world, tmp_path):
    cfg = bt_config(world, tmp_path, model=str(world["reverse"]))
    r = run_tfm("preprocess", "-c", str(cfg), "--set", "data.limit_train=20", "--set", "data.min_train_pairs=20")
    assert r.returncode == 0, r.stderr
    assert "data.limit_train=20 applies to each source: the real pairs and each text" in r.stderr
    assert "back-translation text: " in r.stderr and " past data.limit_train" in r.stderr  # the limit that cut it
    folder = tmp_path / "data" / "bt.synthetic"
    assert len((folder / "back_translation.de").read_text().splitlines()) == 20
    manifest = json.loads((tmp_path / "data" / "bt" / "manifest.json").read_text())
    assert manifest["splits"]["train"]["pairs"] == 20
    assert {name: part["pairs"] + part["too_long"] for name, part in manifest["parts"].items()} == {
        "back_translation": 20,
        "forward_translation": 20,
    }
    for cache in (tmp_path / "cache").glob("*-*"):
        assert json.loads((cache / "cache.json").read_text())["rows"] == 20  # translated as far as used
    state = json.loads((folder / "synthetic.json").read_text())
    assert state["text"]["back_translation"]["past_max_lines"] > 0


@pytest.mark.slow
def test_models_that_translate_the_other_way_or_are_missing_are_refused_naming_their_key(world, tmp_path):
    cfg = bt_config(world, tmp_path / "bt", forward=False, model=str(world["teacher"]))
    r = run_tfm("synthesize", "-c", str(cfg), "--quiet")
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == (
        f"tfm: error: synthetic.back_translation.model: {world['teacher']} translates de->en, "
        "but back-translation for this config needs en->de"
    )
    cfg = bt_config(world, tmp_path / "ft", model=str(world["reverse"]))
    text = cfg.read_text().replace(str(world["teacher"]), str(world["reverse"]))
    cfg.write_text(text)
    r = run_tfm("synthesize", "-c", str(cfg), "--quiet")
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == (
        f"tfm: error: synthetic.forward_translation.teachers: {world['reverse']} translates en->de, "
        "but forward-translation for this config needs de->en"
    )
    cfg = bt_config(world, tmp_path / "gone", forward=False, model=str(tmp_path / "gone.pt"))
    r = run_tfm("synthesize", "-c", str(cfg), "--quiet")
    assert r.returncode == 2, r.stderr
    assert (
        r.stderr.strip()
        == f"tfm: error: synthetic.back_translation.model: checkpoint not found: {tmp_path / 'gone.pt'}"
    )
    for where in ("bt", "ft", "gone"):  # refused before any text was read or translated
        assert not list((tmp_path / where / "cache").glob("*"))
        assert not (tmp_path / where / "data" / "bt.synthetic").exists()


@pytest.mark.slow
def test_text_with_no_usable_line_is_refused_naming_the_file_and_the_counts(world, tmp_path):
    empty = tmp_path / "text" / "blank.en"
    empty.parent.mkdir()
    empty.write_text("\n  \n" + "word " * 60 + "\n")
    cfg = bt_config(world, tmp_path, forward=False, text=[str(empty)], model=str(world["reverse"]))
    r = run_tfm("synthesize", "-c", str(cfg), "--quiet")
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == (
        f"tfm: error: synthetic.back_translation.text: {empty} yield no line to translate (3 lines read, "
        "0 kept; dropped: 2 empty, 1 too long, 0 equal to a val/test sentence, 0 repeated, "
        "0 past synthetic.back_translation.max_lines)"
    )
    assert not (tmp_path / "data" / "bt.synthetic" / "back_translation.en").exists()


@pytest.mark.slow
def test_synthesis_in_two_processes_gives_the_corpus_of_one(world, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    for where in (one, two):
        bt_config(world, where, model=str(world["reverse"]))
    r = run_tfm("synthesize", "-c", str(one / "bt.yaml"), "--set", "train.threads=1")
    assert r.returncode == 0, r.stderr
    r = run_tfm("synthesize", "-c", str(two / "bt.yaml"), "--nproc-per-node", "2")  # one thread each here
    assert r.returncode == 0, r.stderr
    assert "synthesis: 1 more process(es) translating beside this one, 1 thread(s) each" in r.stderr
    a, b = (where / "data" / "bt.synthetic" for where in (one, two))
    for name in pair_files(a):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    for cache in (two / "cache").glob("*-*"):
        assert not list((cache / "claims").iterdir())  # every process ended its claims


@pytest.mark.slow
def test_under_torchrun_the_ranks_translate_together_into_the_corpus_of_one_process(world, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    for where in (one, two):
        bt_config(world, where, model=str(world["reverse"]))
    r = run_tfm("synthesize", "-c", str(one / "bt.yaml"))
    assert r.returncode == 0, r.stderr
    r = subprocess.run(
        [*TFM, "train", "-c", str(two / "bt.yaml"), "--nproc-per-node", "2", "--set", "train.epochs=1", "--quiet"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    a, b = (where / "data" / "bt.synthetic" for where in (one, two))
    for name in pair_files(a):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    assert (two / "checkpoints" / "bt" / "best.pt").is_file()


def test_a_plugin_strategy_back_translates_and_a_part_that_adds_no_pair_is_a_warning(
    tmp_path, restored_threads, caplog
):
    """A strategy from outside (it translates every sentence as nothing) is a back-translation
    search like the built-in ones; a line whose translation is empty makes no pair, and when
    that is every line a warning says so, as one says that real pairs left out are not trained on."""
    import logging

    from helpers import untrained_checkpoint

    from transformer_cli.contracts.strategy import Hypothesis, SearchStrategy
    from transformer_cli.seams import SEARCH_STRATEGIES

    class Shortest(SearchStrategy):
        name = "shortest"

        def search(self, model, src, limits, d):
            return [[Hypothesis([], 0.0, 0.0)] for _ in range(src.size(0))]

    corpus = write_corpus(tmp_path / "corpus", {"train": 10, "val": 5, "test_2016_flickr": 5}, gz=False)
    reverse = reversed_checkpoint(untrained_checkpoint(tmp_path / "r.pt"))
    english = monolingual(tmp_path / "text", "en", 8, seed=7)
    section = {
        "back_translation": {"text": [str(english)], "model": str(reverse), "search": "shortest"},
        "real_weight": 0,
        "cache_dir": str(tmp_path / "cache"),
    }
    path = write_config(tmp_path / "mute.yaml", tmp_path, corpus, train={"threads": 1}, synthetic=section)
    SEARCH_STRATEGIES.register("shortest", Shortest())
    try:
        cfg = load_config(str(path))
        with caplog.at_level(logging.WARNING, logger="tfm"):
            synthesize(cfg)
    finally:
        SEARCH_STRATEGIES.unregister("shortest")
    folder = synthetic_folder(cfg)
    count = json.loads((folder / STATE).read_text())["text"]["back_translation"]["kept"]
    assert (folder / "back_translation.de").read_text() == (folder / "back_translation.en").read_text() == ""
    assert f"warning: back-translation: all {count} translations are empty: the text adds no pair" in caplog.text
    assert "warning: synthetic.real_weight=0: the real pairs are not in the training corpus" in caplog.text


def test_a_plugin_strategy_back_translates_with_its_own_search_options(tmp_path, restored_threads):
    """synthetic.back_translation.search_options are the strategy's own settings, checked where
    the config is loaded as decode.strategy_options are, and the search reads them, not
    decode's; the cache's identity records them."""
    from dataclasses import dataclass

    from helpers import untrained_checkpoint

    from transformer_cli.contracts.strategy import SearchStrategy
    from transformer_cli.inference.search import greedy_search
    from transformer_cli.seams import SEARCH_STRATEGIES

    @dataclass
    class CutOptions:
        tokens: int = 3

    seen: list[int] = []

    class Cut(SearchStrategy):
        name = "cut"

        def search(self, model, src, limits, d):
            own = SEARCH_STRATEGIES.options(d.strategy, d.strategy_options)
            seen.append(own.tokens)
            return [[h] for h in greedy_search(model, src, limits.clamp(max=own.tokens))]

    corpus = write_corpus(tmp_path / "corpus", {"train": 10, "val": 5, "test_2016_flickr": 5}, gz=False)
    reverse = reversed_checkpoint(untrained_checkpoint(tmp_path / "r.pt"))
    english = monolingual(tmp_path / "text", "en", 8, seed=7)
    back = {"text": [str(english)], "model": str(reverse), "search": "cut", "search_options": {"tokens": 2}}
    section = {"back_translation": back, "cache_dir": str(tmp_path / "cache")}
    decode = {"strategy": "cut", "strategy_options": {"tokens": 7}}  # the config's own decoding
    path = write_config(tmp_path / "cut.yaml", tmp_path, corpus, train={"threads": 1}, decode=decode, synthetic=section)
    SEARCH_STRATEGIES.register("cut", Cut(), settings=CutOptions)
    try:
        with pytest.raises(UsageError, match=r"search_options.tokens must be an integer \(got 'two'\)"):
            load_config(str(path), ["synthetic.back_translation.search_options.tokens=two"])
        synthesize(load_config(str(path)))
    finally:
        SEARCH_STRATEGIES.unregister("cut")
    assert seen and set(seen) == {2}
    (state,) = (tmp_path / "cache").glob("back-*/cache.json")
    assert json.loads(state.read_text())["identity"]["strategy_options"] == {"tokens": 2}


def _processes_naming(text: str) -> list[int]:
    """The processes whose command line holds `text`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and text in (proc / "cmdline").read_text(errors="replace"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


@pytest.mark.slow
def test_sigterm_during_shared_synthesis_stops_every_process_within_seconds(world, tmp_path):
    english = monolingual(tmp_path / "many", "en", 3000, seed=11)
    cfg = bt_config(world, tmp_path, forward=False, model=str(world["reverse"]), text=[str(english)])
    proc = subprocess.Popen(
        [*TFM, "synthesize", "-c", str(cfg), "--nproc-per-node", "2", "--set", "synthetic.batch_size=4"],
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(
        json.loads(p.read_text())["rows"] >= 64 for p in (tmp_path / "cache").glob("back-*/cache.json")
    ):
        time.sleep(0.05)
    assert len(_processes_naming(str(cfg))) == 2  # the main process and its helper, translating
    proc.send_signal(signal.SIGTERM)
    stopped = time.monotonic()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and time.monotonic() - stopped <= 5, err
    assert "the translations made so far are kept" in err.strip().splitlines()[-1]
    time.sleep(0.5)
    assert _processes_naming(str(cfg)) == []  # the helper is gone too
