"""What the two torchrun test modules share: the launcher's command and preprocessing in-process."""

import sys
from pathlib import Path


def preprocess(cfg: Path) -> None:
    """In this process (a `tfm preprocess` process would spend seconds importing torch)."""
    from transformer_cli.config_loading import load_config
    from transformer_cli.data.preprocess import prepare

    prepare(load_config(str(cfg)))


TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
