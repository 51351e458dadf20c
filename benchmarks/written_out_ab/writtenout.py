"""Experiment tooling for issue 67's A/B (ab.sh beside it; not part of tfm): bt.yaml's mix
written out as one plain-text corpus, as the written-out pipeline trained it (the real pairs twice, the tagged
back-translations, the forward translations), and a SentencePiece tokenizer that reserves the
written tag as one piece (`▁<bt>`), fitted on that corpus as the written-out pipeline fitted it.

    python writtenout.py DATA_DIR NAME MULTI30K OUT   # DATA_DIR/NAME.synthetic -> OUT/train.{de,en}
"""

import gzip
import shutil
import sys
from pathlib import Path

from transformer_cli.tokenizers.subword import SubwordTokenizer

TAG = "<bt>"


class WrittenOutTags(SubwordTokenizer):
    @classmethod
    def train(cls, lines, cfg, threads, reserved=()):
        fitted = super().train(lines, cfg, threads, (*reserved, TAG))
        return cls(fitted.model, fitted.lowercase)


def lines_of(text: str) -> list[str]:
    """The lines of `text` split at "\\n" alone (str.splitlines also splits at U+2028 and the like)."""
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")


def main(data_dir: str, name: str, multi30k: str, out: str) -> None:
    synthetic, real, folder = Path(data_dir) / f"{name}.synthetic", Path(multi30k), Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    for stem in ("val", "test_2016_flickr"):
        for lang in ("de", "en"):
            (folder / f"{stem}.{lang}.gz").unlink(missing_ok=True)
            shutil.copy(real / f"{stem}.{lang}.gz", folder / f"{stem}.{lang}.gz")
    sides: dict[str, tuple[list[str], list[str], list[str]]] = {}
    for lang in ("de", "en"):
        real_lines = lines_of(gzip.open(real / f"train.{lang}.gz", "rt", encoding="utf-8", newline="").read())
        bt = lines_of((synthetic / f"back_translation.{lang}").read_bytes().decode("utf-8"))
        ft = lines_of((synthetic / f"forward_translation.{lang}").read_bytes().decode("utf-8"))
        sides[lang] = (real_lines, bt, ft)
    written: dict[str, list[str]] = {"de": [], "en": []}
    for index, copies in enumerate((2, 1, 1)):  # the real pairs twice, then BT, then FT
        for de, en in zip(sides["de"][index], sides["en"][index], strict=True):
            if not de.strip() or not en.strip():  # as tfm's pipeline leaves them out
                continue
            for _ in range(copies):
                written["de"].append(f"{TAG} {de}" if index == 1 else de)
                written["en"].append(en)
    for lang, lines in written.items():
        (folder / f"train.{lang}").write_bytes("".join(f"{line}\n" for line in lines).encode("utf-8"))
    print("pairs written:", len(written["de"]))


if __name__ == "__main__":
    main(*sys.argv[1:])
