"""serving/corrections.py off the event loop: with 20,000 corrections stored, posts and lookups
of the translation memory never stall the server's event loop (a task that sleeps 2 ms at a
time measures how late it wakes; the old memory, rebuilt on the loop at each change of the
store, stalled it 0.15-0.25 s a time at this size), nor does another process compacting the log
meanwhile (niced, as docs/corrections.md advises), which loses nothing. The benchmarks' target is 20 ms
(benchmarks/corrections_load.py --loop-stall); this bound leaves room for a test machine running
other tests."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator

import pytest

from transformer_cli.config_corrections import CorrectionsConfig
from transformer_cli.corrections.store import Correction, CorrectionStore
from transformer_cli.serving.corrections import ServedCorrections

STORED = 20_000
BOUND_S = 0.1
COMPACT = (
    "import sys; from transformer_cli.corrections.store import CorrectionStore; CorrectionStore(sys.argv[1]).compact()"
)


async def body(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def longest_stall(stop: asyncio.Event) -> float:
    """The most a 2 ms sleep overslept until `stop`: how long the loop was kept from it."""
    worst = 0.0
    while not stop.is_set():
        start = time.perf_counter()
        await asyncio.sleep(0.002)
        worst = max(worst, time.perf_counter() - start - 0.002)
    return worst


async def poster(served: ServedCorrections, model, i: int) -> list[tuple[str, str]]:
    posted = []
    for n in range(15):
        data = json.dumps({"source": f"Neu {i} {n} .", "corrected": f"New {i} {n} ."}).encode()
        answer = await served.post({"content-length": str(len(data))}, body(data), f"10.0.0.{i}", model, 10)
        posted.append((f"Neu {i} {n} .", answer["id"]))
    return posted


async def looker(served: ServedCorrections, stop: asyncio.Event) -> int:
    looks = 0
    while not stop.is_set():
        await served.remembered([f"Ein Satz {looks % STORED} .", "Nicht da ."])
        looks += 1
    return looks


async def under_load(
    served: ServedCorrections, model, folder, compact: bool
) -> tuple[float, list[tuple[str, str]], int]:
    stop = asyncio.Event()
    stall = asyncio.create_task(longest_stall(stop))
    lookers = [asyncio.create_task(looker(served, stop)) for _ in range(4)]
    posts = [asyncio.create_task(poster(served, model, i)) for i in range(8)]
    if compact:
        compacted = asyncio.create_task(
            asyncio.to_thread(subprocess.run, ["nice", "-n", "19", sys.executable, "-c", COMPACT, str(folder)])
        )
    posted = [p for batch in await asyncio.gather(*posts) for p in batch]
    if compact:
        assert (await compacted).returncode == 0
    await served.remembered([])  # what the log gained (the compacted log: read whole, by the read thread)
    stop.set()
    return await stall, posted, sum(await asyncio.gather(*lookers))


@pytest.mark.parametrize("compact", [False, True], ids=["posts-and-lookups", "with-a-compaction"])
def test_posts_lookups_and_a_compaction_leave_the_event_loop_free_and_lose_nothing(model, tmp_path, compact):
    """Posts and lookups, and a compaction beside them: the loop never stalls past the bound
    (the server takes the compacted log as read: the compaction's note names the place it had
    read to), nothing is lost, and the memory answers from the new log."""
    folder = tmp_path / "store"
    CorrectionStore(folder).add([Correction(f"Ein Satz {i} .", f"A sentence {i} .") for i in range(STORED)])
    cfg = CorrectionsConfig(store=str(folder), per_minute=1000, max_unk_rate=1.0)  # the toy model knows few words
    served = ServedCorrections(cfg, "de")
    stall, posted, looks = asyncio.run(under_load(served, model, folder, compact))
    assert stall < BOUND_S, f"the event loop was blocked {stall:.3f} s"
    assert len(posted) == 120 and looks > 0
    remembered = asyncio.run(served.remembered([source for source, _ in posted] + ["Ein Satz 7 ."]))
    assert [r.id if r else None for r in remembered[:-1]] == [i for _, i in posted]
    assert remembered[-1] is not None and remembered[-1].translation == "A sentence 7 ."
