"""checkpoint.py: plain-data checkpoint files with a content sha256, verified on every read,
and the typed `Checkpoint` read from them, of this version or an older one."""

from __future__ import annotations

import dataclasses
import pickle

import pytest
import torch

from transformer_cli.checkpoint import (
    FORMAT,
    Checkpoint,
    CheckpointError,
    TrainState,
    content_digest,
    read_payload,
    write_payload,
)
from transformer_cli.errors import UsageError


def _payload() -> dict:
    return {
        "state_dict": {"w": torch.arange(6.0).reshape(2, 3), "steps": torch.tensor([3])},
        "metrics": {"valid_loss": 1.25, "epoch": 2, "end_of_epoch": True, "name": None},
        "tokenizer": {"model": b"\x00\x01", "vocab": ["<unk>", "<pad>"]},
    }


def test_save_then_load_returns_the_payload_with_format_and_digest(tmp_path):
    write_payload(tmp_path / "a.pt", _payload())
    loaded = read_payload(tmp_path / "a.pt")
    assert loaded["format"] == FORMAT and loaded["sha256"] == content_digest(loaded)
    assert torch.equal(loaded["state_dict"]["w"], _payload()["state_dict"]["w"])
    assert loaded["metrics"] == _payload()["metrics"] and loaded["tokenizer"] == _payload()["tokenizer"]
    torch.load(tmp_path / "a.pt", weights_only=True)  # plain data: the safe loader reads it


def test_digest_tells_values_types_and_shapes_apart():
    base = content_digest({"x": 1})
    assert content_digest({"x": 1}) == base
    for other in ({"x": "1"}, {"x": 1.0}, {"x": True}, {"x": [1]}, {"x": 2}):
        assert content_digest(other) != base, other
    t = torch.arange(6.0)
    assert content_digest({"t": t}) != content_digest({"t": t.reshape(2, 3)})
    assert content_digest({"t": t}) != content_digest({"t": t.double()})
    assert content_digest({"a": 1, "b": 2}) == content_digest({"b": 2, "a": 1})  # key order
    assert content_digest({"x": 1, "sha256": "anything"}) == base  # the digest is not hashed


def test_only_plain_data_can_be_saved(tmp_path):
    with pytest.raises(TypeError, match="plain data"):
        write_payload(tmp_path / "a.pt", {"x": object()})
    assert not (tmp_path / "a.pt").exists()


def test_changed_content_fails_the_digest(tmp_path):
    payload = {**_payload(), "format": FORMAT}
    payload["sha256"] = content_digest(payload)
    payload["metrics"] = {**payload["metrics"], "valid_loss": 0.5}  # edited after hashing
    torch.save(payload, tmp_path / "edited.pt")
    with pytest.raises(CheckpointError, match="does not match its stored sha256"):
        read_payload(tmp_path / "edited.pt")


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_damaged_files_are_checkpoint_errors_naming_the_file(tmp_path, damage):
    path = tmp_path / "a.pt"
    write_payload(path, _payload())
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"not a checkpoint" * 10)
    with pytest.raises(CheckpointError, match=str(path)):
        read_payload(path)


def test_other_torch_files_are_not_checkpoints(tmp_path):
    torch.save({"state_dict": {}}, tmp_path / "plain.pt")
    with pytest.raises(CheckpointError, match="not a tfm checkpoint"):
        read_payload(tmp_path / "plain.pt")
    with pytest.raises(UsageError, match="checkpoint not found"):
        read_payload(tmp_path / "missing.pt")


class _RunsCode:
    def __reduce__(self):
        return (print, ("this must never run",))


def test_pickles_that_would_run_code_are_refused_unloaded(tmp_path, capsys):
    path = tmp_path / "evil.pt"
    path.write_bytes(pickle.dumps({"format": FORMAT, "x": _RunsCode()}))
    with pytest.raises(UsageError, match="refusing to load"):
        read_payload(path)
    assert "never run" not in capsys.readouterr().out


def test_keep_previous_keeps_the_replaced_checkpoint(tmp_path):
    last, prev = tmp_path / "last.pt", tmp_path / "last.prev.pt"
    write_payload(last, {"step": 1})
    write_payload(last, {"step": 2}, keep_previous=prev)
    assert read_payload(last)["step"] == 2 and read_payload(prev)["step"] == 1


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda p: p.pop("model"), "checkpoint does not fit this version of tfm: missing 'model'"),
        (
            lambda p: p["config"]["model"].update(d_model="wide"),
            "checkpoint does not fit this version of tfm: model.d_model must be an integer (got 'wide')",
        ),
        (
            lambda p: p["config"]["decode"].update(beam_size=0),
            "its decode settings do not fit this version of tfm: decode.beam_size=0 is out of range",
        ),
        (
            lambda p: p.update(config=["not", "a", "mapping"]),
            "checkpoint does not fit this version of tfm: its config is a list, not a mapping",
        ),
    ],
)
def test_content_that_does_not_fit_names_the_checkpoint(tmp_path, damage, reason):
    """A verified file whose content this tfm cannot use: one error naming the file, whether it
    is loaded to translate or to export."""
    from helpers import ct2_export, untrained_checkpoint

    import transformer_cli as tfm

    payload = read_payload(untrained_checkpoint(tmp_path / "good.pt"))
    damage(payload)
    path = tmp_path / "odd.pt"
    write_payload(path, {k: v for k, v in payload.items() if k not in ("format", "sha256")})
    with pytest.raises(CheckpointError) as caught:
        tfm.load(path, device="cpu")
    assert str(caught.value).startswith(f"{path}: {reason}")
    if "checkpoint does not fit" in reason:
        with pytest.raises(CheckpointError, match=f"^{path}: checkpoint does not fit"):
            ct2_export(path, tmp_path / "export")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["good.pt", "odd.pt"]


def _model_checkpoint(tmp_path, **changes) -> Checkpoint:
    from helpers import untrained_checkpoint

    return dataclasses.replace(Checkpoint.read(untrained_checkpoint(tmp_path / "m.pt")), **changes)


def test_a_checkpoint_round_trips_with_its_training_state(tmp_path):
    state = TrainState(
        progress={"step": 7},
        optimizer={"state": {}},
        scheduler={"last_epoch": 7},
        rng=[{"torch": torch.arange(3, dtype=torch.uint8)}],
        world_size=1,
    )
    written = _model_checkpoint(tmp_path, metrics={"valid_loss": 2.5}, run_identity="abc", train_state=state)
    written.write(tmp_path / "last.pt")
    payload = read_payload(tmp_path / "last.pt")
    assert payload["format"] == FORMAT == "tfm-checkpoint/2"
    assert "config" not in payload["model"]  # the model's settings are stored once, in "config"
    read = Checkpoint.read(tmp_path / "last.pt")
    assert read.sha256 == written.sha256 == payload["sha256"]
    assert (read.architecture, read.model_config, read.metrics, read.run_identity) == (
        "transformer",
        written.config["model"],
        {"valid_loss": 2.5},
        "abc",
    )
    assert all(torch.equal(read.weights[k], v) for k, v in written.weights.items())
    assert read.train_state.progress == {"step": 7} and read.train_state.grad_scaler is None
    assert torch.equal(read.train_state.rng[0]["torch"], torch.arange(3, dtype=torch.uint8))


def test_version_1_files_are_read_and_translate_the_same(tmp_path):
    """As tfm wrote them before version 2: the model's settings inside "model" too, and (the
    oldest) no architecture name and no world size in the training state."""
    import transformer_cli as tfm

    current = _model_checkpoint(tmp_path)
    v1 = current.to_payload()
    v1["model"] = {
        "config": current.model_config,
        "src_vocab_size": current.src_vocab_size,
        "tgt_vocab_size": current.tgt_vocab_size,
    }
    v1["train_state"] = {"progress": {"step": 3}, "optimizer": {}, "scheduler": {}, "rng": [{"a": 1}, {"a": 2}]}
    v1["format"] = "tfm-checkpoint/1"
    v1["sha256"] = content_digest(v1)
    torch.save(v1, tmp_path / "v1.pt")
    read = Checkpoint.read(tmp_path / "v1.pt")
    assert (read.architecture, read.model_config) == ("transformer", current.model_config)
    assert read.train_state.world_size == 2  # one RNG state per training process
    lines = ["Ein Mann fährt Fahrrad.", "Zwei Hunde."]
    assert tfm.load(tmp_path / "v1.pt", device="cpu").translate(lines) == tfm.load(
        tmp_path / "m.pt", device="cpu"
    ).translate(lines)


def test_files_of_a_newer_tfm_are_refused_in_one_line(tmp_path):
    payload = {**_payload(), "format": "tfm-checkpoint/3"}
    payload["sha256"] = content_digest(payload)
    torch.save(payload, tmp_path / "new.pt")
    with pytest.raises(
        CheckpointError,
        match=r"new\.pt was written by a newer tfm \(format "
        r"tfm-checkpoint/3; this one reads up to tfm-checkpoint/2\)",
    ):
        read_payload(tmp_path / "new.pt")
