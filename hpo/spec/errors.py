"""Turn pydantic validation errors into `ConfigError` messages: the field path, the problem, and the fix.

training.lerning_rate: unknown field (did you mean learning_rate?)
search_space.learning_rate.low: must be > 0 when log is true
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from typing import Any, Union

from pydantic import BaseModel, ValidationError

from hpo.errors import ConfigError


class FieldProblem(ValueError):
    """Raised inside a model validator to report a problem with one of the model's fields (or a deeper path)."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class SpecError(ConfigError):
    """A run or study file that does not validate. `problems` holds (field path, message) pairs."""

    def __init__(self, source: str, problems: list[tuple[str, str]]) -> None:
        self.source = source
        self.problems = problems
        lines = [f"{path}: {message}" if path else message for path, message in problems]
        if len(lines) == 1:
            text = f"{source}: {lines[0]}"
        else:
            text = f"{source}: {len(lines)} problems\n" + "\n".join(f"  {line}" for line in lines)
        super().__init__(text)


def join_path(*parts: Any) -> str:
    return ".".join(str(part) for part in parts if part not in (None, ""))


# pydantic's tag for one member of a union (`low: int | float` fails as `low.int` and `low.float`): the type, not a field.
UNION_MEMBER = re.compile(r"^(int|float|str|bool|none|bytes|[a-z-]+\[.*\])$")
EXPECTED = re.compile(r"^must be (.+) \(got (.+)\)$")


def problems_from_validation_error(error: ValidationError, root: type[BaseModel]) -> list[tuple[str, str]]:
    problems: dict[str, list[str]] = {}
    for item in error.errors(include_url=False):
        loc = list(item["loc"])
        cause = (item.get("ctx") or {}).get("error")
        if isinstance(cause, FieldProblem):
            problems.setdefault(join_path(*loc, cause.field), []).append(cause.message)
            continue
        message = _describe(item, root)
        while loc and isinstance(loc[-1], str) and UNION_MEMBER.match(loc[-1]):
            loc.pop()
        problems.setdefault(join_path(*loc), []).append(message)
    return [(path, _one_message(messages)) for path, messages in problems.items()]


def _one_message(messages: list[str]) -> str:
    """A field's problems as one line: a union's "must be a whole number" and "must be a number" say "a number"."""
    unique = list(dict.fromkeys(messages))
    expected = [EXPECTED.match(message) for message in unique]
    if len(unique) == 1 or not all(expected):
        return "; ".join(unique)
    kinds = list(dict.fromkeys(match.group(1) for match in expected if match))
    if "a number" in kinds and "a whole number" in kinds:
        kinds.remove("a whole number")  # every whole number is a number
    return f"must be {' or '.join(kinds)} (got {expected[0].group(2)})"


def _describe(item: dict[str, Any], root: type[BaseModel]) -> str:
    kind, loc, value = item["type"], list(item["loc"]), item.get("input")
    if kind == "extra_forbidden":
        return _unknown_field(root, loc)
    if kind == "missing":
        return "required field is missing"
    if kind == "literal_error":
        expected = item.get("ctx", {}).get("expected", "")
        choices = [
            part.strip().strip("'") for part in expected.replace(" or ", ",").split(",") if part.strip()
        ]
        close = difflib.get_close_matches(str(value), choices, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        return f"{value!r} is not allowed; choose one of {', '.join(choices)}{hint}"
    if kind == "value_error":
        return str(item["msg"]).removeprefix("Value error, ")
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return _not_a_mapping(root, loc, value)
    message = str(item["msg"])
    message = message.replace("Input should be", "must be").replace("Input", "value")
    # pydantic's words for YAML's shapes; a class name of ours means nothing to the file's author.
    message = re.sub(r"(a )?valid dictionary( or instance of \w+)?", "a mapping", message)
    # a YAML author's words for pydantic's types; the parser's reason after the comma repeats the value's fault
    message = message.split(", unable to ")[0]
    message = message.replace("a valid integer", "a whole number").replace("a valid boolean", "true or false")
    message = message.replace("a valid ", "a ").replace(" valid ", " ")
    message = re.sub(r"\ba (?=[aeiou])", "an ", message)
    message = message[0].lower() + message[1:]
    return f"{message} (got {_show(value)})" if "got" not in message else message


def _not_a_mapping(root: type[BaseModel], loc: list[Any], value: Any) -> str:
    """A section given as something other than `key: value` lines: name its fields, and `true` where it switches."""
    model = model_at(root, loc)
    fields = ""
    if model is not None:
        names = [field.alias or name for name, field in model.model_fields.items()]
        fields = f" with the fields {', '.join(names)}"
    parent = model_at(root, loc[:-1]) if loc else None
    switch = getattr(parent, "switches", {}).get(str(loc[-1])) if parent is not None and loc else None
    shape = f"true ({switch}) or a mapping" if switch else "a mapping"
    return f"must be {shape}{fields} (got {_show(value)})"


def _show(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return f"a {'mapping' if isinstance(value, dict) else 'list'}"
    return repr(value)


def _unknown_field(root: type[BaseModel], loc: list[Any]) -> str:
    model = model_at(root, loc[:-1])
    if model is None:
        return "unknown field"
    name = str(loc[-1])
    moved = getattr(model, "moved_fields", {}).get(name)
    if moved:
        return f"unknown field ({moved})"
    names = list(model.model_fields)
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if close:
        return f"unknown field (did you mean {close[0]}?)"
    return f"unknown field; allowed: {', '.join(names)}"


def model_at(root: type[BaseModel], loc: list[Any]) -> type[BaseModel] | None:
    """The pydantic model class found by following `loc` (field names, dict keys, list indexes) from `root`."""
    annotation: Any = root
    for part in loc:
        annotation = _unwrap(annotation, part)
        if annotation is None:
            return None
    model = _as_model(annotation)
    return model


def _unwrap(annotation: Any, part: Any) -> Any:
    model = _as_model(annotation)
    if model is not None:
        field = model.model_fields.get(str(part)) or _by_alias(model, str(part))
        return field.annotation if field is not None else None
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin in (dict,) and len(args) == 2:
        return args[1]
    if origin in (list, tuple) and args:
        return args[0]
    return None


def _by_alias(model: type[BaseModel], alias: str) -> Any:
    """The field a file names by its alias (`storage:` is the field `storage_options`)."""
    return next((f for f in model.model_fields.values() if f.alias == alias), None)


def _as_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (Union, types.UnionType):
        for arg in typing.get_args(annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                return arg
    return None
