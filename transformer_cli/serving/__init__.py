"""`tfm serve`: a batching HTTP server over the Python API that hot-reloads promoted models."""
