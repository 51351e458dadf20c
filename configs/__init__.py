"""The shipped YAML configs; installed as the package `transformer_cli.configs`."""
