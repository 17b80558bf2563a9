"""`--set key=value` overrides and the YAML loader shared by run and study files.

The value of an override is parsed as YAML (`--set training.learning_rate=3e-4`, `--set study.enqueue=[{lr: 0.1}]`) and
the key is a dotted path into the file (`search_space.lr.high`, `study.enqueue.0.lr` for a list item). Overrides are
applied to the raw mapping before validation, so a misspelt key is reported by the schema like any other unknown field.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml

from hpo.errors import ConfigError

# A file's values once every alias is written out in full. A study file is a few hundred values; an "alias bomb" (ten
# aliases of ten aliases of ... a string) is a few hundred bytes that expand to billions, which PyYAML builds as shared
# references but every later copy (--set's deepcopy, pydantic, json.dumps) expands: a hang, then a MemoryError.
MAX_EXPANDED_NODES = 100_000


class AliasBomb(yaml.YAMLError):
    """Aliases that expand past MAX_EXPANDED_NODES values, or that refer to a node containing them (a cycle)."""


class _SafeLoader(yaml.SafeLoader):
    """yaml.SafeLoader that reads `3e-4` and `1e5` as floats, and refuses aliases that expand past a sane size.

    PyYAML follows YAML 1.1, where a float needs a dot (`3.0e-4`), so `learning_rate: 3e-4` would load as the string
    "3e-4". Every ML config writes learning rates that way, so accept the YAML 1.2 float syntax too.
    """

    def compose_document(self) -> yaml.Node | None:
        # Checked on the composed graph, before any Python object is built: an alias is one shared node there.
        node = super().compose_document()
        if node is not None:
            _expanded_size(node, {}, set())
        return node


def _expanded_size(node: yaml.Node, sizes: dict[int, int], open_nodes: set[int]) -> int:
    """The number of values `node` stands for with its aliases written out; each shared node is counted once per use
    but visited once, so a bomb is measured in the time it takes to read it."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_nodes:
        raise AliasBomb(
            f"line {node.start_mark.line + 1}: an alias refers to a node that contains it; write it out"
        )
    open_nodes.add(key)
    size = 1
    if isinstance(node, yaml.SequenceNode):
        size += sum(_expanded_size(item, sizes, open_nodes) for item in node.value)
    elif isinstance(node, yaml.MappingNode):
        size += sum(
            _expanded_size(k, sizes, open_nodes) + _expanded_size(v, sizes, open_nodes) for k, v in node.value
        )
    open_nodes.discard(key)
    if size > MAX_EXPANDED_NODES:
        raise AliasBomb(
            f"line {node.start_mark.line + 1}: its aliases (*name) expand to more than {MAX_EXPANDED_NODES:,} values "
            "(an alias bomb?); write the values out, or use fewer nested aliases"
        )
    sizes[key] = size
    return size


_FLOAT = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
_SafeLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))


def parse_yaml(text: str, *, source: str) -> Any:
    try:
        return yaml.load(text, Loader=_SafeLoader)  # noqa: S506 - a SafeLoader subclass: data only, never code
    except AliasBomb as error:
        raise ConfigError(f"{source}: refused: {error}") from None
    except RecursionError:  # `[[[[...` thousands deep: PyYAML composes nested nodes recursively
        raise ConfigError(f"{source}: refused: nested too deeply to be a run or study file") from None
    except yaml.MarkedYAMLError as error:
        hint = " (quote a value meant as text: --set 'key=\"...\"')" if source.startswith("--set") else ""
        raise ConfigError(f"{source}: not valid YAML{hint}: {describe_yaml_error(error)}") from error
    except yaml.YAMLError as error:
        raise ConfigError(f"{source}: not valid YAML: {error}") from error


def describe_yaml_error(error: yaml.MarkedYAMLError) -> str:
    """Where and what, with the offending line: PyYAML's own text names the input "<unicode string>", not the file."""
    mark = error.problem_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    context = f"{error.context}: " if error.context else ""
    start = error.context_mark
    if error.context and start is not None and mark is not None and start.line != mark.line:
        context = f"{error.context} that starts on line {start.line + 1}: "  # the unclosed bracket is there
    snippet = mark.get_snippet() if mark is not None else None
    return f"{where}{context}{error.problem or ''}" + (f"\n{snippet}" if snippet else "")


def load_yaml_file(path: str | Path) -> dict[str, Any]:
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"{file}: no such file")
    data = parse_yaml(file.read_text(encoding="utf-8"), source=str(file))
    if data is None:
        raise ConfigError(f"{file}: the file is empty")
    if not isinstance(data, dict):
        raise ConfigError(
            f"{file}: expected a mapping of sections (task:, training:, ...), got a {type(data).__name__}"
        )
    return data


def parse_overrides(overrides: list[str] | tuple[str, ...] | None) -> list[tuple[list[str], Any]]:
    """Parse `key=value` strings into (path, value) pairs; the value is YAML."""
    parsed = []
    for item in overrides or ():
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected key=value, e.g. --set training.learning_rate=3e-4")
        path = key.split(".")
        if any(not part for part in path):
            raise ConfigError(f"--set {item!r}: {key!r} is not a dotted path such as training.learning_rate")
        value = parse_yaml(raw, source=f"--set {key}") if raw.strip() else None
        parsed.append((path, value))
    return parsed


def apply_overrides(data: dict[str, Any], overrides: list[str] | tuple[str, ...] | None) -> dict[str, Any]:
    """Return a copy of `data` with each `--set key=value` applied (missing mappings on the path are created)."""
    result = copy.deepcopy(data)
    for path, value in parse_overrides(overrides):
        _set_path(result, path, value)
    return result


def _set_path(data: dict[str, Any], path: list[str], value: Any) -> None:
    node: Any = data
    for depth, part in enumerate(path[:-1]):
        here = ".".join(path[: depth + 1])
        if isinstance(node, list):
            node = node[_list_index(node, part, here)]
            continue
        if node.get(part) is None:
            node[part] = {}
        node = node[part]
        if not isinstance(node, (dict, list)):
            raise ConfigError(
                f"--set {'.'.join(path)}: {here} is {node!r}, not a mapping, so it has no key "
                f"{path[depth + 1]!r}"
            )
    last = path[-1]
    if isinstance(node, list):
        node[_list_index(node, last, ".".join(path))] = value
    else:
        node[last] = value


def _list_index(items: list[Any], part: str, where: str) -> int:
    if not part.lstrip("-").isdigit() or not -len(items) <= int(part) < len(items):
        raise ConfigError(f"--set: {where} must be an index into a list of {len(items)} items, got {part!r}")
    return int(part)
