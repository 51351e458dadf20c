"""Bad configs, options, corpora and checkpoints: one line, a documented exit code, nothing touched.

Each case here was found by running tfm as its users do (docs/reliability.md lists them); the
siblings of each case are tried beside it.
"""

from __future__ import annotations

import json
import shutil

import pytest
from helpers import write_corpus
from reliability.cron_helpers import error_lines, run_dir, write_cron_config

from transformer_cli.checkpoint import read_payload, write_payload


def _snapshot(run) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in run.iterdir() if p.is_file() and p.name != ".lock"}


def _one_error(result, code: int) -> str:
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    [line] = error_lines(result.stderr)
    return line


def test_bad_configs_and_options_are_refused_before_anything_is_touched(tmp_path, finished, tfm_fork):
    cfg, run = finished["config"], finished["run"]
    before = _snapshot(run)
    empty, comments = tmp_path / "empty.yaml", tmp_path / "comments.yaml"
    empty.write_text("")
    comments.write_text("# nothing but a comment\n\n")
    duplicate = tmp_path / "dup.yaml"
    duplicate.write_text(cfg.read_text() + "train:\n  epochs: 3\n")
    cases = {
        "empty": ("train", "-c", str(empty)),
        "comments": ("train", "-c", str(comments)),
        "duplicate": ("train", "-c", str(duplicate)),
        "inf lr": ("train", "-c", str(cfg), "--set", "train.lr=1e999"),
        "yaml inf": ("train", "-c", str(cfg), "--set", "train.lr=.inf"),
        "nan": ("train", "-c", str(cfg), "--set", "train.criterion_options.label_smoothing=.nan"),
        "huge max_len": ("train", "-c", str(cfg), "--set", "model.max_len=200000000"),
        "huge d_model": ("train", "-c", str(cfg), "--set", "model.d_model=1048576"),
        "huge beam": ("train", "-c", str(cfg), "--set", "decode.beam_size=100000"),
        "promote": ("train", "-c", str(cfg), "--promote", "sometimes"),
        "device": ("train", "-c", str(cfg), "--device", "tpu"),
    }
    results = dict(zip(cases, tfm_fork.run_all(tmp_path / "logs", *cases.values())))
    lines = {name: _one_error(r, 2) for name, r in results.items()}
    assert lines["empty"] == (
        f"tfm: error: {empty}: the config is empty: give at least one section "
        "(copy one of the shipped configs, e.g. base.yaml, to start from its values)"
    )
    assert "the config is empty" in lines["comments"]
    train_line = cfg.read_text().splitlines().index("train:") + 1
    assert f"{duplicate}:" in lines["duplicate"] and "duplicate key 'train'" in lines["duplicate"]
    assert f"first given on line {train_line}" in lines["duplicate"]
    assert lines["inf lr"] == "tfm: error: --set train.lr must be a finite number (got '1e999')"
    assert "must be a finite number" in lines["yaml inf"] and "must be a finite number" in lines["nan"]
    assert "model.max_len=200000000 is out of range: must be <= 16384" in lines["huge max_len"]
    assert "model.d_model=1048576 is out of range" in lines["huge d_model"]
    assert "decode.beam_size=100000 is out of range" in lines["huge beam"]
    assert lines["promote"] == ("tfm: error: --promote must be if-better, always or never (got 'sometimes')")
    assert lines["device"] == "tfm: error: --device must be auto, cpu, cuda or mps (got 'tpu')"
    assert _snapshot(run) == before  # nothing rebuilt, deleted or emptied


def test_too_few_training_pairs_is_an_error_and_nothing_is_published(tmp_path, cron_data, tfm_fork):
    cfg = write_cron_config(tmp_path, cron_data, epochs=1)
    data = [tmp_path / "data1", tmp_path / "data2"]  # run side by side: a folder each
    one, few = tfm_fork.run_all(
        tmp_path / "logs",
        ("train", "-c", str(cfg), "--set", "data.train_max_len=1", "--set", f"data.dir={data[0]}"),
        ("preprocess", "-c", str(cfg), "--set", "data.limit_train=20", "--set", f"data.dir={data[1]}"),
    )
    line = _one_error(one, 2)
    assert line == (
        "tfm: error: only 0 training pairs are left of 300 (0 empty, 300 longer than "
        "data.train_max_len=1 tokens); at least data.min_train_pairs=100 are needed"
    )
    assert "only 20 training pairs are left" in _one_error(few, 2)
    assert not (run_dir(cfg) / "published.pt").exists() and not (run_dir(cfg) / "best.pt").exists()
    for folder in data:  # no data folder, no work folder: only the (empty) lock file
        assert [p.name for p in folder.iterdir()] == [".cron.lock"]


def test_a_diverging_run_stops_with_an_error_and_promotes_nothing(tmp_path, cron_data, tfm_fork):
    cfg = write_cron_config(tmp_path, cron_data, epochs=2, clip_norm=None)
    [r] = tfm_fork.run_all(tmp_path / "logs", ("train", "-c", str(cfg), "--set", "train.lr=1e6"))
    line = _one_error(r, 1)
    assert line.startswith("tfm: error: training diverged: train loss nan") and "train.lr=1000000.0" in line
    run = run_dir(cfg)
    assert not (run / "published.pt").exists() and not (run / "best.pt").exists()

    def refuse(constant: str) -> None:
        pytest.fail(f"{constant} in a JSON file")

    for text in (run / "metrics.jsonl", run / "promotions.log"):
        if text.exists():  # strict JSON only: no NaN or Infinity tokens
            for record in text.read_text().splitlines():
                json.loads(record, parse_constant=refuse)


def test_unreadable_corpus_and_damaged_files_name_the_file(tmp_path, cron_data, finished, tfm_fork):
    corpus = write_corpus(tmp_path / "corpus")
    (corpus / "train.de.gz").unlink()
    # A file whose read fails (EIO) even for root, who may read any file that is only chmod 000.
    (corpus / "train.de.gz").symlink_to("/proc/self/mem")
    cfg = write_cron_config(tmp_path / "a", {**cron_data, "corpus": corpus, "data": tmp_path / "data"})

    crafted = tmp_path / "crafted.pt"
    payload = read_payload(finished["run"] / "published.pt")
    payload["tokenizer"] = {"joint": True, "shared": {"kind": ["sentencepiece"], "model": 7}}
    write_payload(crafted, {k: v for k, v in payload.items() if k not in ("sha256", "format")})
    noise = tmp_path / "noise.pt"
    noise.write_bytes(bytes(range(256)) * 64)

    corpus_r, crafted_r, noise_r = tfm_fork.run_all(
        tmp_path / "logs",
        ("preprocess", "-c", str(cfg)),
        ("translate", "--checkpoint", str(crafted), "Ein Mann."),
        ("translate", "--checkpoint", str(noise), "Ein Mann."),
    )
    assert _one_error(corpus_r, 2) == f"tfm: error: cannot read {corpus / 'train.de.gz'}: Input/output error"
    line = _one_error(crafted_r, 1)
    assert "checkpoint does not fit this version of tfm" in line and "malformed tokenizer state" in line
    line = _one_error(noise_r, 1)
    assert str(noise) in line and "weights_only" not in line and "damaged or" in line


def test_invalid_utf8_on_stdin_prints_the_good_lines_before_the_error(finished):
    import subprocess
    import sys

    good = "Ein Mann sieht einen Ball.\nEine Frau hält ein Buch.\n".encode()
    r = subprocess.run(
        [sys.executable, "-m", "transformer_cli", "translate", "--checkpoint", str(finished["run"] / "published.pt")],
        input=good + b"\xff\xfe bad\n",
        capture_output=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert len(r.stdout.decode().splitlines()) == 2  # both good lines were translated and printed
    assert error_lines(r.stderr.decode()) == ["tfm: error: stdin line 3: not valid UTF-8 (byte 0xff at column 1)"]


def test_busy_newcomer_exits_75_before_importing_torch(tmp_path, finished):
    """The lock is taken first: a busy run answers at once, even on a loaded machine."""
    import fcntl
    import subprocess
    import sys

    run = tmp_path / "busy"
    shutil.copytree(finished["run"], run)
    with open(run / ".lock", "w") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)
        holder.write("4242\n")
        holder.flush()
        probe = (
            "import atexit, sys\n"
            "atexit.register(lambda: print('torch imported:', 'torch' in sys.modules, file=sys.stderr))\n"
            "from transformer_cli.cli import main\nmain()\n"
        )
        r = subprocess.run(
            [
                sys.executable,
                "-c",
                probe,
                "train",
                "-c",
                str(finished["config"]),
                "--set",
                f"train.out_dir={tmp_path}",
                "--set",
                "name=busy",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert r.returncode == 75, r.stderr
    assert "another tfm train holds its lock (pid 4242)" in r.stderr
    assert "torch imported: False" in r.stderr
