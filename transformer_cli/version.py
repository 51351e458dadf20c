"""tfm's version, in one module that imports nothing: the package's `__version__`, `tfm
--version` and every export's manifest read it here (pyproject.toml's version is the same)."""

__version__ = "0.1.0"
