"""Resolve `module:function` import paths named in run and study files, with errors a user can act on.

A YAML file names code only by import path; nothing from a file is ever evaluated. The folder of the file (and the
folder above its package, when the file sits inside a Python package such as `studies/`) and the current directory are
added to `sys.path`, so a study folder next to the YAML file is importable without installing it.
"""

from __future__ import annotations

import difflib
import importlib
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpo.errors import ConfigError

IMPORT_PATH = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


def check_import_path(value: str) -> str:
    """Validate the *shape* `package.module:function` (no import); raise ValueError with the fix."""
    if IMPORT_PATH.match(value):
        return value
    if ":" not in value and "." in value:
        module, _, function = value.rpartition(".")
        raise ValueError(f"expected 'module:function', got {value!r} (write {module}:{function})")
    raise ValueError(f"expected an import path 'module:function', got {value!r}")


def add_search_paths(base_dir: str | Path | None) -> None:
    """Make modules next to a run/study file importable: its folder, the root of its package, and the cwd."""
    candidates = [Path.cwd()]
    if base_dir is not None:
        folder = Path(base_dir).resolve()
        candidates.append(folder)
        root = folder
        while (root / "__init__.py").exists() and root.parent != root:
            root = root.parent
        candidates.append(root)
    for path in candidates:
        if str(path) not in sys.path:
            # Appended, not prepended: an installed package of the same name keeps priority.
            sys.path.append(str(path))


def import_module(module_name: str, *, field: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if module_name == missing or module_name.startswith(missing + "."):
            raise ConfigError(
                f"{field}: module {module_name!r} not found (check the spelling, or run from the folder "
                f"that contains it)"
            ) from error
        raise ConfigError(
            f"{field}: importing {module_name!r} failed: it needs module {missing!r}, which is not installed"
        ) from error
    except Exception as error:  # a syntax error or a failing import inside the user's module
        raise ConfigError(
            f"{field}: importing {module_name!r} failed: {type(error).__name__}: {error}"
        ) from error


def resolve_callable(path: str, *, field: str, base_dir: str | Path | None = None) -> Callable[..., Any]:
    """Import `module:function` (the function part may be dotted, e.g. `mod:Class.method`) and return the callable."""
    try:
        check_import_path(path)
    except ValueError as error:
        raise ConfigError(f"{field}: {error}") from None
    add_search_paths(base_dir)
    module_name, _, attribute_path = path.partition(":")
    target: Any = import_module(module_name, field=field)
    owner = module_name
    for attribute in attribute_path.split("."):
        if not hasattr(target, attribute):
            names = [name for name in dir(target) if not name.startswith("_")]
            close = difflib.get_close_matches(attribute, names, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"{field}: module {owner!r} has no attribute {attribute!r}{hint}")
        target = getattr(target, attribute)
        owner = f"{owner}:{attribute}"
    if not callable(target):
        raise ConfigError(f"{field}: {path!r} is a {type(target).__name__}, not a function")
    return target
