"""`Correction`: one corrected translation, as the store keeps it (store.py) and every reader of
its records sees it (state.py's fold, the guards, the memory, training, the server)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field


@dataclass
class Correction:
    """One corrected translation, as the store keeps it."""

    source: str
    corrected: str
    output: str | None = None  # what the model had answered, when the client says
    client: str | None = None  # the sender's label for itself: stored, never counted
    origin: str = "api"  # serve, file, api
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])
    time: float = field(default_factory=time.time)
    status: str = "accepted"
    reasons: list[str] = field(default_factory=list)
    caller: str | None = None  # who sent it, as the limits count it (`local_caller`, serving's `caller`)
