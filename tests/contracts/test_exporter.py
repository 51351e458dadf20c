"""contracts/exporter.py: Exporter, an export format: what a format must implement, what it
inherits (no refusals, its engine as description, no warnings), and tfm's own formats as
seams.EXPORTERS gives them, each naming the engine that runs its folders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import untrained_checkpoint

from transformer_cli.checkpoint import Checkpoint
from transformer_cli.contracts.exporter import Exporter
from transformer_cli.export_manifest import ExportManifest
from transformer_cli.seams import ENGINES, EXPORTERS


class Copy(Exporter):
    """A format that only says what it would write."""

    engine = "copy"

    def export(self, model: Checkpoint, source: Path, output: Path, options: Any) -> tuple[ExportManifest, float]:
        raise NotImplementedError


def test_a_format_implements_export_and_inherits_the_rest(tmp_path):
    with pytest.raises(TypeError, match="abstract"):
        Exporter()
    fmt = Copy()
    checkpoint = Checkpoint.read(untrained_checkpoint(tmp_path / "m.pt"))
    (tmp_path / "out").mkdir()
    manifest = ExportManifest.new("copy", tmp_path / "m.pt", checkpoint, tmp_path / "out")
    assert fmt.refusals(checkpoint) == []
    assert fmt.describe(manifest) == "copy" and fmt.extra is None and fmt.settings is None


def test_tfms_formats_name_an_engine_that_runs_their_folders():
    assert {"ctranslate2", "hf"} <= set(EXPORTERS.names())
    for name in ("ctranslate2", "hf"):
        fmt = EXPORTERS[name]
        assert isinstance(fmt, Exporter) and fmt.engine in ENGINES
    assert (EXPORTERS["ctranslate2"].engine, EXPORTERS["hf"].engine) == ("ctranslate2", "transformers")
    assert EXPORTERS.settings_of("ctranslate2").__name__ == "Ct2Options"
    assert EXPORTERS.settings_of("hf") is None
