"""hpo as a backend of other tools' APIs.

hf_search.py   `Trainer.hyperparameter_search(backend="optuna")`, transformers' API on the study manager's trial
               isolation and pruning; registered with `trainer.search` through the `trainer.search_backends` entry
               point in pyproject.toml
"""
