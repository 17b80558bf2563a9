"""hpo: an Optuna study manager for the `trainer` package, driven by YAML files."""

__version__ = "0.1.0"

# Public names imported on first use, so `import hpo` stays light: name -> module that defines it.
_LAZY = {
    "load_exported": "hpo.export.load",
    "run_study": "hpo.study.manager",
    "StudySummary": "hpo.study.summary",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'hpo' has no attribute {name!r}")
