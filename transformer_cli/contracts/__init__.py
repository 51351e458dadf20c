"""What the entries of seams.py's registries are, below every layer that implements them, so
that seams.py types each registry with its entries' contract (type-only imports), importing
no layer, torch included (these modules import torch for type checkers only):

    tokenizer.py   Tokenizer (TOKENIZERS: a kind), SpecialIds, TrainingText
    model.py       TranslationModel and its incremental parts; Architecture (ARCHITECTURES)
    strategy.py    SearchStrategy (SEARCH_STRATEGIES), Hypothesis
    corpus.py      ParallelCorpus (CORPORA), NamedText (TEXT_CORPORA)
    exporter.py    Exporter (EXPORTERS)
    engine.py      Engine (ENGINES)

The training seams' entries (transforms, criteria, optimizers, schedules) are functions,
declared in seams.py itself.
"""
