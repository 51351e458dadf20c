"""ModelWatcher on its own (real checkpoint files, a real reload thread, no server): a new file
is swapped in, a damaged one is refused while the old model serves on, a vanished one is noted."""

from __future__ import annotations

import asyncio
import os
import shutil
from concurrent.futures import ThreadPoolExecutor

from helpers import untrained_checkpoint

from transformer_cli.api import Translator, open_translator
from transformer_cli.serving.metrics import Metrics
from transformer_cli.serving.reloader import ModelWatcher


def test_new_damaged_and_vanished_files(tmp_path):
    served = untrained_checkpoint(tmp_path / "published.pt")
    other = untrained_checkpoint(tmp_path / "other.pt", d_ff=48)
    first = open_translator(served, "cpu")
    metrics = Metrics()

    def replace(source: bytes) -> None:  # as `tfm train` promotes: a new file renamed into place
        (tmp_path / "incoming").write_bytes(source)
        os.replace(tmp_path / "incoming", served)

    async def scenario() -> list:
        seen = []
        with ThreadPoolExecutor(1) as reload_thread:
            watcher = ModelWatcher(first, lambda p: open_translator(p, "cpu"), 0.02, reload_thread, metrics)
            polling = asyncio.create_task(watcher.run())

            async def settle() -> None:
                await asyncio.sleep(0.5)
                seen.append((watcher.current.sha256, watcher.file_missing))

            replace(other.read_bytes())
            await settle()
            replace(b"not a checkpoint")
            await settle()
            served.unlink()
            await settle()
            shutil.copy(other, served)  # back, holding the model already served: no reload
            await settle()
            polling.cancel()
        return seen

    second = open_translator(other, "cpu").sha256
    assert asyncio.run(scenario()) == [(second, False), (second, False), (second, True), (second, False)]
    reloads = {r: metrics.registry.get_sample_value("tfm_model_reloads_total", {"result": r}) for r in ("ok", "failed")}
    assert reloads == {"ok": 1.0, "failed": 1.0}


def test_an_ensemble_reloads_when_one_member_is_promoted(tmp_path):
    members = [untrained_checkpoint(tmp_path / f"m{i}" / "published.pt") for i in range(2)]
    better = untrained_checkpoint(tmp_path / "better.pt", d_ff=48)
    first = open_translator(members, "cpu")

    async def scenario() -> Translator:
        with ThreadPoolExecutor(1) as reload_thread:
            watcher = ModelWatcher(first, lambda p: open_translator(p, "cpu"), 0.02, reload_thread, Metrics())
            polling = asyncio.create_task(watcher.run())
            (tmp_path / "incoming").write_bytes(better.read_bytes())
            os.replace(tmp_path / "incoming", members[1])  # the second member's run promotes
            for _ in range(500):  # at most 10 s: the reload runs beside whatever else loads the CPU
                if watcher.current is not first:
                    break
                await asyncio.sleep(0.02)
            polling.cancel()
            return watcher.current

    now = asyncio.run(scenario())
    assert now.sha256 != first.sha256 and now.paths == members
    assert [m.sha256 for m in now.backend.metadata.members] == [
        first.backend.metadata.members[0].sha256,
        open_translator(better, "cpu").sha256,
    ]
