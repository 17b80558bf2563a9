"""The test folders have no `__init__.py` (they mirror the packages by folder), so pytest imports each test file by its
basename: two files with one name in different folders stop the whole collection with "import file mismatch"."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_every_test_file_name_is_unique():
    folders: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        folders[path.name].append(str(path.parent.relative_to(TESTS)))
    clashes = {name: where for name, where in folders.items() if len(where) > 1}
    assert not clashes, f"rename one of each: {clashes}"
