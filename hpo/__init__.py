"""hpo: an Optuna study manager for the `trainer` package, driven by YAML files."""

__version__ = "0.1.0"
