"""The reverse run of a config: the model that back-translates for it. It is an ordinary tfm
run with the two languages swapped, named `<name>.reverse` (its data in `data/<name>.reverse/`,
its checkpoints in `checkpoints/<name>.reverse/`), trained on the real pairs only (never on the
config's corrections, which go the other way): `tfm train -c CFG --reverse` (and `tfm evaluate
-c CFG --reverse` scores it). Its recipe (tokenizer,
model, train) is the config's own, or that of `synthetic.reverse_recipe`: a config whose
schedule suits the real pairs, where the config's own is made for a corpus many times larger."""

from __future__ import annotations

import copy
from pathlib import Path

from ..config import Config
from ..config_corrections import CorrectionsConfig
from ..config_loading import command_for, given_overrides, load_config
from ..config_synthetic import SyntheticConfig
from ..errors import UsageError

SUFFIX = ".reverse"
REVERSE = "reverse"  # synthetic.back_translation.model: this config's reverse run


def reverse_config(cfg: Config) -> Config:
    """`cfg` with the languages swapped, for its real pairs alone (no synthetic text and none of
    the corrections, which are pairs of `cfg`'s direction), and no parent model."""
    out = copy.deepcopy(cfg)
    if cfg.synthetic.reverse_recipe is not None:  # with the command line's --set of its sections
        own = [o for o in given_overrides(cfg) if o.split(".", 1)[0] in ("tokenizer", "model", "train")]
        recipe = load_config(cfg.synthetic.reverse_recipe, own)
        out.tokenizer, out.model, out.train = recipe.tokenizer, recipe.model, recipe.train
    out.name = cfg.name + SUFFIX
    out.data.src_lang, out.data.tgt_lang = cfg.data.tgt_lang, cfg.data.src_lang
    out.synthetic, out.corrections = SyntheticConfig(), CorrectionsConfig()
    out.decode.ensemble, out.decode.ensemble_weights = [], None
    out.train.init_from = None
    return out


def back_translation_model(cfg: Config) -> Path:
    """The checkpoint that back-translates for `cfg` (synthetic.back_translation.model)."""
    named = cfg.synthetic.back_translation.model
    if named != REVERSE:
        return Path(named)
    path = reverse_config(cfg).run_dir / "best.pt"
    if not path.is_file():
        raise UsageError(
            f"back-translation needs the reverse model {path}: train it first with "
            f"`{command_for(cfg, 'train', '--reverse')}` (or name a model in "
            "synthetic.back_translation.model)"
        )
    return path
