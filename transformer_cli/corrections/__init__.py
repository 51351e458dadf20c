"""Users' corrections of translations (the `corrections:` section, config_corrections.py):
posted to `tfm serve` (POST /corrections), added from files (`tfm feedback add`) or through the
Python API, guarded, answered from memory at once, and trained on by the next run.

store.py      the append-only, durable log every writer and reader shares (and its compaction)
state.py      what its records come to, kept up from the new ones: the one fold the rest reads
guards.py     what a correction must pass to be accepted (else it is held for review)
memory.py     the accepted corrections by source: the translation memory tfm serve answers from
files.py      corrections from TSV and TMX files (tfm feedback add)
served.py     opt-in: the sources tfm serve translated, kept as text for forward translation
training.py   the accepted corrections as a part of the training data (data/parts.py)
"""
