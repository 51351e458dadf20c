"""Terms at decode time, with a trained toy model as users load it: a term the translation
misses is placed by decoding again under constraints, one it uses already leaves the
translation as it was, a line without terms is translated exactly as without a glossary, and a
term the model cannot write is reported with the translation kept."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import transformer_cli as tfm
from transformer_cli.api import Translator
from transformer_cli.corrections.glossary import Glossary, Term
from transformer_cli.errors import UsageError
from transformer_cli.inference.terms import Glossaries, terms_of

LINES = ["Ein mann sieht einen ball.", "Eine frau hält ein buch im park.", "Zwei hunde tragen einen hut."]


@pytest.fixture(scope="module")
def model(trained) -> Translator:
    return tfm.load(trained["run"] / "best.pt", device="cpu")


def _with(model: Translator, tmp_path: Path, tsv: str, beam: int = 1):
    path = tmp_path / "terms.tsv"
    path.write_text(tsv, encoding="utf-8")
    plain = dataclasses.replace(model.options(beam_size=beam))
    return model.translate_n_best(LINES, plain), model.translate_n_best(
        LINES, dataclasses.replace(plain, glossary=str(path))
    )


@pytest.mark.parametrize("beam", [1, 5])
def test_a_missed_term_is_placed_and_lines_without_terms_are_translated_as_before(model, tmp_path, beam) -> None:
    before, after = _with(model, tmp_path, "Ball\tflower\n", beam)
    assert "ball" in before.translations[0][0].text.lower()  # the toy model translates it
    assert "flower" in after.translations[0][0].text.lower()
    assert [(u.source, u.target, u.how) for u in after.terms[0]] == [("Ball", "flower", "placed")]
    for line in (1, 2):  # no term: the same translation, token for token
        assert after.translations[line][0].tokens == before.translations[line][0].tokens
        assert after.terms[line] == []
    assert before.terms == []


def test_a_term_the_model_uses_already_leaves_its_translation_alone(model, tmp_path) -> None:
    before, after = _with(model, tmp_path, "buch\tbook\n")
    assert after.translations[1][0].tokens == before.translations[1][0].tokens
    assert [u.how for u in after.terms[1]] == ["model"]


def test_a_term_the_model_cannot_write_is_reported_and_the_translation_kept(model, tmp_path) -> None:
    before, after = _with(model, tmp_path, "Ball\tΣφαίρα\nhut\tcap\n")
    uses = {u.source: u for line in after.terms for u in line}
    assert uses["Ball"].how == "unplaced" and "cannot write it" in uses["Ball"].why
    assert uses["hut"].how == "placed" and "cap" in after.translations[2][0].text.lower()
    assert "ball" in after.translations[0][0].text.lower()  # the model's own, not dropped


def test_a_changed_glossary_file_is_read_again(model, tmp_path) -> None:
    _, first = _with(model, tmp_path, "Ball\tflower\n")
    _, second = _with(model, tmp_path, "Ball\tflowers and more\n")
    assert "flower" in first.translations[0][0].text.lower()
    assert "flowers and more" in second.translations[0][0].text.lower()


def test_tfm_translate_places_terms_and_says_which_it_cannot_on_stderr(trained, tmp_path) -> None:
    from helpers import run_tfm

    glossary = tmp_path / "terms.tsv"
    glossary.write_text("Ball\tflower\nbuch\tΣφαίρα\n", encoding="utf-8")
    r = run_tfm("translate", "-c", str(trained["config"]), "--glossary", str(glossary), *LINES[:2])
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert "flower" in out[0].lower() and "book" in out[1].lower()
    assert "warning: line 2: term 'buch' -> 'Σφαίρα' not placed: the model cannot write it" in r.stderr
    bad = tmp_path / "bad.tsv"
    bad.write_text("Ball flower\n", encoding="utf-8")
    r = run_tfm("translate", "-c", str(trained["config"]), "--glossary", str(bad), LINES[0])
    assert r.returncode == 2 and r.stderr.strip().endswith(
        f"{bad}:1: a glossary line is a source term, a tab and its target term "
        "(and a note after another tab): got 'Ball flower'"
    ), r.stderr


def test_the_terms_of_lines_are_none_when_no_line_holds_one_and_a_missing_file_is_named(tmp_path) -> None:
    glossary = Glossary([Term("Ball", "flower", "t:1")])
    assert terms_of(glossary, ["Ein Hut.", "Kein Ding."]) == []
    assert terms_of(None, LINES) == []
    assert [[t.target for t in line] for line in terms_of(glossary, ["Ein Hut.", "Ein BALL."])] == [[], ["flower"]]
    with pytest.raises(UsageError, match="decode.glossary: .*missing.tsv"):
        Glossaries().get(str(tmp_path / "missing.tsv"))


def test_a_stores_terms_are_used_over_the_files_from_the_next_call_with_their_ids(model, tmp_path) -> None:
    """decode.glossary_store: the terms accepted into a corrections store, over those of the
    decode.glossary file, each use saying which stored term it was."""
    from transformer_cli.config_corrections import CorrectionsConfig
    from transformer_cli.corrections.guards import guarded
    from transformer_cli.corrections.store import TERMS, Correction, CorrectionStore

    folder, file = tmp_path / "store", tmp_path / "terms.tsv"
    file.write_text("Ball\tbook\nhut\tcap\n", encoding="utf-8")
    store = CorrectionStore(folder, TERMS)
    check = guarded(CorrectionsConfig(store=str(folder)), terms=True)
    (ball,) = store.add([Correction("BALL", "flower")], check)
    options = dataclasses.replace(model.options(), glossary=str(file), glossary_store=str(folder))
    first = model.translate_n_best(LINES, options)
    assert "flower" in first.translations[0][0].text.lower() and "cap" in first.translations[2][0].text.lower()
    assert [(u.target, u.id) for u in first.terms[0]] == [("flower", ball.id)]
    assert [u.as_json() for u in first.terms[0]] == [
        {"source": "BALL", "target": "flower", "used": "placed", "term": ball.id}
    ]
    assert [(u.target, u.id) for u in first.terms[2]] == [("cap", "")]  # the file's
    (hut,) = store.add([Correction("Hut", "book")], check)  # over the file's hut -> cap, from the next call
    second = model.translate_n_best(LINES, options)
    assert "book" in second.translations[2][0].text.lower() and [u.id for u in second.terms[2]] == [hut.id]
    assert second.translations[1][0].tokens == first.translations[1][0].tokens  # no term: as before


def test_tfm_translate_with_a_config_uses_its_stores_terms(trained, tmp_path) -> None:
    from helpers import run_tfm

    store = tmp_path / "store"
    config = tmp_path / "with-store.yaml"
    config.write_text(f"extends: {trained['config']}\ncorrections:\n  store: {store}\n", encoding="utf-8")
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("Ball\tflower\n", encoding="utf-8")
    assert run_tfm("feedback", "add", "--terms", str(glossary), "-c", str(config)).returncode == 0
    r = run_tfm("translate", "-c", str(config), "--checkpoint", str(trained["run"] / "best.pt"), *LINES[:2])
    assert r.returncode == 0, r.stderr
    assert "flower" in r.stdout.splitlines()[0].lower()
