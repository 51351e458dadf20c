"""The machine tfm runs on: its CPUs (machine, cpu_load), the threads a run uses (threads), its
scheduling priority (priority), the memory allocator (allocator), the torch device and
precision (device), and the signals that stop a run (stop_signals). Imports nothing of tfm but
errors.py: every layer above may use it."""
