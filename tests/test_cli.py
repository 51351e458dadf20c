import subprocess
import sys

from helpers import run_tfm


def test_help_lists_commands_and_imports_no_torch():
    code = (
        "import sys\nfrom typer.testing import CliRunner\nfrom transformer_cli.cli import app\n"
        "r = CliRunner().invoke(app, ['--help'])\nprint(r.output)\n"
        "print('HEAVY', any(m in sys.modules for m in ('torch', 'spacy', 'sentencepiece')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    for command in ("preprocess", "train", "evaluate", "translate"):
        assert command in out
    assert "HEAVY False" in out


def test_every_command_has_help_with_examples():
    for command in ("preprocess", "train", "evaluate", "translate"):
        r = run_tfm(command, "--help")
        assert r.returncode == 0 and "Examples:" in r.stdout, command


def test_version():
    r = run_tfm("--version")
    assert r.returncode == 0 and r.stdout.startswith("tfm ")


def test_unknown_option_is_usage_error():
    r = run_tfm("preprocess", "--no-such-option")
    assert r.returncode == 2 and "No such option" in r.stderr
