"""Training pairs made from monolingual text (issue 39; the `synthetic:` config section).

corpora.py     where monolingual text comes from: named corpora (multi30k-task2, fetched and
               checksummed like task 1), files and folders, the config's own training side
text.py        cleaning it: empty, over-long, val/test and duplicate lines dropped and counted
cache.py       translations kept by line, per model and search: resumable, append-only
generate.py    translating the lines a cache lacks (beam, sampling, noised beam; ensembles)
noise.py       the noise of noised back-translation (Edunov et al. 2018)
mixture.py     each direction's pairs as files (`synthetic_parts(cfg)`: parts preprocessing
               encodes beside the corpus; training/mix_plan.py mixes them by weight, each tag
               put in front as batches are drawn)
reverse.py     the reverse run of a config (languages swapped): the back-translation model
"""
