"""corrections/correction.py: a correction as the store keeps it: its own id and time, accepted
unless a guard holds it, and the same object whoever imports it (the store re-exports it)."""

from __future__ import annotations

import time

from transformer_cli.corrections import store
from transformer_cli.corrections.correction import Correction


def test_a_correction_gets_its_own_id_and_time_and_is_accepted_until_a_guard_says_otherwise() -> None:
    before = time.time()
    a, b = Correction("Ein Hund .", "A dog ."), Correction("Ein Hund .", "A dog .")
    assert a.id != b.id and len(a.id) == 16 and int(a.id, 16) >= 0
    assert before <= a.time <= time.time()
    assert (a.status, a.reasons, a.caller, a.origin) == ("accepted", [], None, "api")
    assert store.Correction is Correction
