"""The lock (constraints.txt) decides every version a new user installs: it pins each requirement of pyproject.toml
that the README's install takes (`.[all]`), at a version the requirement's range admits, and it holds what
.ci/holds.txt holds back. A dependency added without `bash .ci/lock`, or a range moved past the lock, fails here."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent


def pins(path: Path) -> dict[str, Version]:
    """name -> version of each `name==version` line (comments and blank lines skipped)."""
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"{path.name}: {line!r} is not name==version"
            found[canonicalize_name(name)] = Version(version)
    return found


def installed_requirements() -> list[Requirement]:
    """What `pip install -e ".[all]"` asks for: the dependencies and every extra that `all` names, recursively."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted, pending, seen = list(project["dependencies"]), ["all"], set()
    while pending:
        extra = pending.pop()
        seen.add(extra)
        for text in extras[extra]:
            requirement = Requirement(text)
            if canonicalize_name(requirement.name) == "hpo":
                pending.extend(sorted(requirement.extras - seen))  # one order in every process (pytest-xdist)
            else:
                wanted.append(text)
    return [Requirement(text) for text in wanted]


LOCK = pins(ROOT / "constraints.txt")


@pytest.mark.parametrize("requirement", installed_requirements(), ids=str)
def test_the_lock_pins_every_requirement_within_its_range(requirement):
    name = canonicalize_name(requirement.name)
    assert name in LOCK, f"constraints.txt has no {name}: run bash .ci/lock and commit constraints.txt"
    assert requirement.specifier.contains(LOCK[name], prereleases=True), (
        f"constraints.txt pins {name}=={LOCK[name]}, outside pyproject.toml's {requirement}: run bash .ci/lock"
    )


def test_the_lock_keeps_every_hold():
    for name, version in pins(ROOT / ".ci" / "holds.txt").items():
        assert LOCK.get(name) == version, f"constraints.txt moved past the hold {name}=={version}"


def test_the_readme_installs_from_the_lock():
    install = (ROOT / "README.md").read_text().split("```bash\n", 1)[1].split("```", 1)[0]
    assert install.count("pip install -c constraints.txt ") == 2, install
