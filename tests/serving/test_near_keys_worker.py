"""near_keys_worker.py: the process computing keys ahead, real: it covers the store's accepted
corrections (but those the model trained on), then each new one, with the keys the model
reads; it ends when its server's pipe closes; a model that reads no examples (its backend
says so, whatever its type) gets no keys; a store keeps the folders of the models last
served, a folder in use kept."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import torch

import transformer_cli as tfm
from transformer_cli.corrections.store import Correction, CorrectionStore
from transformer_cli.inference.near_keys import KeysFile, keys_folder
from transformer_cli.serving import near_keys_worker
from transformer_cli.serving.near_keys_worker import KeysAhead, follow, prune

PAIRS = [("Ein mann sieht einen ball.", "A man sees a ball."), ("Ein hut.", "A hat."), ("Ein buch.", "A book.")]


def _until(condition, seconds: float = 90.0) -> None:
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.2)


def test_a_worker_covers_the_store_then_each_new_correction_and_ends_with_its_server(trained, tmp_path) -> None:
    store = tmp_path / "store"
    CorrectionStore(store).add([Correction(s, t) for s, t in PAIRS[:2]])
    path = trained["run"] / "best.pt"
    model = tfm.load(path, device="cpu")
    keys = KeysFile(keys_folder(store, model.sha256))
    one = KeysAhead(store, path)
    one.start()
    try:
        _until(lambda: len(keys) == 2)
        CorrectionStore(store).add([Correction(*PAIRS[2])])
        _until(lambda: len(keys) == 3)
        expected = model.backend.example_keys(PAIRS)
        got = keys.get(PAIRS)
        for pair, k in zip(PAIRS, expected):
            assert torch.equal(got[pair].keys, k.keys) and torch.equal(got[pair].values, k.values)
    finally:
        one.close()
    assert one._process is not None and one._process.returncode == 0


def test_a_store_keeps_the_folders_of_the_models_last_served_and_one_in_use(tmp_path) -> None:
    root = tmp_path / "store" / "near-keys"
    folders = [root / name for name in ("a" * 16, "b" * 16, "c" * 16, "d" * 16)]
    for age, folder in enumerate(folders):
        folder.mkdir(parents=True)
        (folder / "index.bin").write_bytes(b"")
        os.utime(folder / "index.bin", (1000 + age, 1000 + age))
    (root / ".pruned-x").mkdir()  # a removal a crash cut short
    hold = "import fcntl, sys, time; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); print(1, flush=True)"
    holder = subprocess.Popen(
        [sys.executable, "-c", hold + "; time.sleep(60)", str(folders[0] / ".writer.lock")],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline()  # another process writes it
        prune(tmp_path / "store", folders[1])
    finally:
        holder.kill()
        holder.wait()
    assert sorted(p.name for p in root.iterdir()) == ["a" * 16, "b" * 16, "d" * 16]  # in use, served, newest
    prune(tmp_path / "store", folders[1])
    assert sorted(p.name for p in root.iterdir()) == ["b" * 16, "d" * 16]
    assert not Path(folders[0]).exists()


def test_a_model_whose_backend_reads_no_examples_gets_no_keys_until_it_changes(tmp_path, monkeypatch) -> None:
    """The worker asks the backend `reads_examples`, not its type: one that says no is waited
    past, its `example_keys` never called, no folder made."""

    def no_keys(pairs):
        raise AssertionError("asked for keys")

    backend = SimpleNamespace(reads_examples=False, example_keys=no_keys)
    monkeypatch.setattr("transformer_cli.api.load", lambda *args, **kwargs: SimpleNamespace(backend=backend))
    monkeypatch.setattr(near_keys_worker, "IDLE_S", 0.0)
    store = CorrectionStore(tmp_path / "store")
    store.add([Correction(*PAIRS[0])])
    answers = iter([True, True, False])
    follow(store, tmp_path / "model.pt", lambda: next(answers))
    assert next(answers, None) is None  # asked until the model changed
    assert not (tmp_path / "store" / "near-keys").exists()
