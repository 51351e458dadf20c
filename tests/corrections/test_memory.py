"""corrections/memory.py: the accepted corrections by source, the latest first, read again when
the log grows (another process's too)."""

from __future__ import annotations

import time

from transformer_cli.corrections.memory import TranslationMemory
from transformer_cli.corrections.store import Correction, CorrectionStore


def test_the_memory_answers_accepted_corrections_and_follows_the_log(tmp_path):
    memory = TranslationMemory(CorrectionStore(tmp_path / "s"))
    assert memory.lookup("Ein Hund .") is None and len(memory) == 0
    other = CorrectionStore(tmp_path / "s")  # another process's writer
    first = Correction("Ein Hund .", "A dog .", time=time.time() - 5)
    held = Correction("Eine Katze .", "A cat .", status="held")
    other.add([first, held])
    memory.refresh()
    found = memory.lookup("  Ein  Hund . ")
    assert found is not None and (found.translation, found.id) == ("A dog .", first.id)
    assert memory.lookup("Eine Katze .") is None  # held: not answered
    later = Correction("Ein Hund .", "One dog .")
    other.add([later])
    other.decide([held.id], "accepted")
    memory.refresh()
    assert memory.lookup("Ein Hund .").translation == "One dog ."
    assert memory.lookup("Eine Katze .").translation == "A cat ."
    other.decide([later.id], "rejected")
    memory.refresh()
    assert memory.lookup("Ein Hund .").translation == "A dog ."


def test_a_correction_another_thread_read_from_the_log_is_not_missed(tmp_path):
    """The memory rebuilds when the store's corrections changed, whoever read the log: here a
    write of this process reads another process's correction in before the memory looks."""
    store = CorrectionStore(tmp_path / "s")
    store.add([Correction("Ein Hund .", "A dog .")])
    memory = TranslationMemory(store)
    CorrectionStore(tmp_path / "s").add([Correction("Eine Katze .", "A cat .")])  # another process
    seen = []

    def check(known, c):  # runs inside this process's add, after it read the log, before it writes
        memory.refresh()
        seen.append(memory.lookup("Eine Katze ."))
        return c

    store.add([Correction("Ein Baum .", "A tree .")], check)
    assert seen[0] is not None and seen[0].translation == "A cat ."
