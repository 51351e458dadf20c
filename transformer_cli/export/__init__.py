"""`tfm export`: tfm checkpoints to CTranslate2 models, and decoding with them."""
