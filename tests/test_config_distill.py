"""config_distill.py: a `distill:` section (of earlier versions) reads as forward translation of
the training sources by its teachers, the same translations (the same search, so the same
translation cache), with one warning naming where it was given and the keys to write; a new
key given beside it is refused, naming both."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from transformer_cli.config_distill import NEW_KEYS, DistillConfig
from transformer_cli.config_loading import load_config
from transformer_cli.config_synthetic import SyntheticConfig
from transformer_cli.config_values import lookup
from transformer_cli.errors import UsageError
from transformer_cli.synthetic.directions import directions
from transformer_cli.training.mix_plan import PlannedSource, mix_plan

OLD = """\
extends: tiny.yaml
distill:
  teachers: [t1.pt, t2.pt]
  weights: [1.0, 2.0]
  beam_size: 4
  combine: prob
  batch_size: 64
"""
NEW = """\
extends: tiny.yaml
synthetic:
  forward_translation:
    text: [parallel]
    teachers: [t1.pt, t2.pt]
    beam_size: 4
    combine: prob
    weights: [1.0, 2.0]
  batch_size: 64
  chunk_lines: 1000
  real_weight: 0
"""
# OLD's search as the translation cache's identity recorded it when distill: was a direction of
# its own (computed then, and kept): its caches and lineage stay current
DISTILLED_SEARCH = {
    "search": "beam",
    "beam_size": 4,
    "weights": [1.0, 2.0],
    "combine": "prob",
    "chunk_lines": 1000,
    "batch_size": 64,
}
WRITE = (
    "write synthetic.forward_translation.text: [parallel], synthetic.forward_translation.teachers: "
    "[t1.pt, t2.pt], synthetic.forward_translation.beam_size: 4, synthetic.forward_translation.combine: "
    "prob, synthetic.forward_translation.weights: [1.0, 2.0], synthetic.batch_size: 64, "
    "synthetic.chunk_lines: 1000, synthetic.real_weight: {weight} (the old name is read until a later release)"
)


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_distill_section_reads_as_forward_translation_of_the_training_sources(tmp_path, caplog):
    """The same synthetic section, directions, search (the cache's identity) and mix as the new
    keys it names in one warning; keep_original: the real pairs once."""
    old, new = write(tmp_path, OLD, "old.yaml"), write(tmp_path, NEW, "new.yaml")
    with caplog.at_level(logging.WARNING):
        was = load_config(old)
    assert _warnings(caplog) == [
        f"warning: {old}:2: distill is now forward translation of the training sources: " + WRITE.format(weight=0)
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        now = load_config(new)
    assert not _warnings(caplog)  # the keys it says to write: no warning
    assert was.synthetic == now.synthetic and not hasattr(was, "distill")
    (forward,) = directions(was)
    assert forward.search == DISTILLED_SEARCH and forward.kind == "forward"
    assert forward.search == directions(now)[0].search and forward.decode(was.decode) == directions(now)[0].decode(
        now.decode
    )
    assert mix_plan(was) == mix_plan(now)
    assert mix_plan(was).sources == (PlannedSource("train", 0), PlannedSource("forward_translation", 1))
    kept = load_config(old, ["distill.keep_original=true"])
    assert (
        mix_plan(kept).sources[0]
        == PlannedSource("train", 1)
        == mix_plan(load_config(new, ["synthetic.real_weight=1"])).sources[0]
    )


def test_distill_across_an_extends_chain_and_set_is_merged_first(tmp_path, caplog):
    """A parent's distill: and its child's merge as they did, the child's --set distill.* over
    them; the warning names the section's line (the child's) and each --set."""
    write(tmp_path, "extends: tiny.yaml\ndistill:\n  teachers: [t.pt]\n  keep_original: true\n", "parent.yaml")
    child = write(tmp_path, "extends: parent.yaml\ndistill:\n  beam_size: 3\n", "child.yaml")
    with caplog.at_level(logging.WARNING):
        cfg = load_config(child, ["distill.chunk_lines=10"])
    ft, sc = cfg.synthetic.forward_translation, cfg.synthetic
    assert (ft.text, ft.teachers, ft.beam_size, sc.chunk_lines, sc.real_weight) == (["parallel"], ["t.pt"], 3, 10, 1)
    (warning,) = _warnings(caplog)
    assert warning.startswith(f"warning: {child}:2, --set distill.chunk_lines=10: distill is now forward translation")
    only_set = load_config("tiny.yaml", ["distill.teachers=[t.pt]"])
    assert (only_set.synthetic.forward_translation.text, only_set.synthetic.chunk_lines) == (["parallel"], 1000)


def test_a_new_key_beside_distill_is_refused_naming_both(tmp_path):
    """Given beside distill: (the same key, or one its defaults set), a new key is refused with
    the lines of both; one at its default (a full dump of an earlier version's settings) is not."""
    both = write(tmp_path, OLD + "synthetic:\n  forward_translation: {beam_size: 3}\n")
    with pytest.raises(UsageError) as refused:
        load_config(both)
    assert str(refused.value) == (
        f"{both}:5, {both}:9: distill.beam_size is the old name of synthetic.forward_translation.beam_size: "
        "give synthetic.forward_translation.beam_size alone"
    )
    implied = write(tmp_path, OLD + "synthetic:\n  real_upsample: 2\n", "implied.yaml")
    with pytest.raises(UsageError) as refused:
        load_config(implied)
    assert str(refused.value) == (
        f"{implied}:9, {implied}:2: distill is the old name of synthetic.real_weight (here 0): "
        "give synthetic.real_weight alone"
    )
    dump = (
        OLD + "synthetic:\n  chunk_lines: 2000\n  real_upsample: 1\n  forward_translation: {text: [], beam_size: 5}\n"
    )
    assert (
        load_config(write(tmp_path, dump, "dump.yaml")).synthetic
        == load_config(write(tmp_path, NEW, "new.yaml")).synthetic
    )


def test_distill_beside_back_translation_makes_both(tmp_path):
    """Refused while distill: was a direction of its own; now two directions of one section."""
    path = write(tmp_path, OLD + "synthetic:\n  back_translation: {text: [parallel], model: r.pt}\n")
    cfg = load_config(path)
    assert [d.name for d in directions(cfg)] == ["back_translation", "forward_translation"]
    assert [s.name for s in mix_plan(cfg).sources] == ["train", "back_translation", "forward_translation"]


def test_each_distill_key_becomes_one_that_takes_the_same_values():
    """Of the same type and bounds (keep_original aside: true or false, the real pairs' weight 1
    or 0), so that what distill: took, its new keys take."""
    old = {f.name: f for f in dataclasses.fields(DistillConfig)}
    for name, key in NEW_KEYS.items():
        *path, last = key.removeprefix("synthetic.").split(".")
        section = lookup(SyntheticConfig(), ".".join(path)) if path else SyntheticConfig()
        new = {f.name: f for f in dataclasses.fields(section)}[last]
        if name != "keep_original":
            assert (new.type, {b: new.metadata[b] for b in ("ge", "le", "gt", "lt")}) == (
                old[name].type,
                {b: old[name].metadata[b] for b in ("ge", "le", "gt", "lt")},
            ), name
    assert set(NEW_KEYS) == set(old)


def test_distills_own_keys_are_checked_by_their_names(tmp_path, caplog):
    """Its keys keep their types and bounds, errors naming the old key; without teachers the
    section is ignored, with a warning."""
    for override, message in [
        ("distill.beam_size=0", "--set distill.beam_size=0: distill.beam_size=0 is out of range: must be >= 1"),
        ("distill.keep_original=maybe", "distill.keep_original must be true or false (got 'maybe')"),
        ("distill.teacher=[t.pt]", "unknown key 'distill.teacher' (did you mean 'distill.teachers'?)"),
    ]:
        with pytest.raises(UsageError) as refused:
            load_config(write(tmp_path, OLD), [override])
        assert str(refused.value).endswith(message)
    with pytest.raises(UsageError, match=r"synthetic.forward_translation.weights must be one number per teacher \(2\)"):
        load_config(write(tmp_path, OLD), ["distill.weights=[1.0]"])
    empty = write(tmp_path, "extends: tiny.yaml\ndistill:\n  beam_size: 4\n", "empty.yaml")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        cfg = load_config(empty)
    assert not cfg.synthetic.enabled
    assert _warnings(caplog) == [f"warning: {empty}:2: distill is ignored: it names no teachers (drop it)"]
