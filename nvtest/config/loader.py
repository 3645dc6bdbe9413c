"""YAML config files validated by pydantic, with errors that name file, line and field.

Every config file of nvtest (SKU profiles, overlays, inventories, suites) is read
through :func:`load_model`, so an unknown key or a missing unit is reported as::

    configs/skus/h100.yaml:42: thresholds.gemm.bf16_tflops.unit: Field required
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from nvtest.errors import ConfigError

__all__ = ["load_model", "load_yaml_with_lines", "validate_model"]

M = TypeVar("M", bound=BaseModel)

LineMap = dict[tuple[str | int, ...], int]


def _walk(node: yaml.Node, path: tuple[str | int, ...], out: LineMap) -> Any:
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _scalar(key_node)
            result[key] = _walk(value_node, path + (key,), out)
            out[path + (key,)] = key_node.start_mark.line + 1
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_walk(item, path + (i,), out) for i, item in enumerate(node.value)]
    return _scalar(node)


def _scalar(node: yaml.Node) -> Any:
    return yaml.SafeLoader(yaml.serialize(node)).get_single_data()


def load_yaml_with_lines(path: Path) -> tuple[Any, LineMap]:
    """Read a YAML file; return its data and a map from key path to 1-based line.

    Raises:
        ConfigError: the file cannot be read or is not valid YAML (with its line).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", path=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            "not UTF-8 text (is this a YAML file?)", path=str(path), line=text_line_of(path.read_bytes(), exc.start)
        ) from exc
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"invalid YAML: {problem}", path=str(path), line=line) from exc
    lines: LineMap = {}
    if root is None:
        return None, lines
    return _walk(root, (), lines), lines


def text_line_of(data: bytes, offset: int) -> int:
    """1-based line number of byte ``offset`` in ``data``."""
    return data.count(b"\n", 0, offset) + 1


def validate_model(model: type[M], data: Any, *, path: str, lines: LineMap | None = None) -> M:
    """Validate ``data`` as ``model``; on failure raise ConfigError for the first error.

    The error names the file, the line (from ``lines``, the nearest known
    enclosing key) and the dotted field path.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        # an unknown key explains a "field required" beside it (a typo'd key): report it first
        errors = sorted(errors, key=lambda e: e.get("type") != "extra_forbidden")
        err = errors[0]
        loc = tuple(err.get("loc", ()))
        line = None
        if lines:
            probe = loc
            while probe and probe not in lines:
                probe = probe[:-1]
            line = lines.get(probe)
        field = ".".join(str(p) for p in loc) or None
        msg = err.get("msg", "invalid value").removeprefix("Value error, ")
        if err.get("type") == "extra_forbidden":
            msg = "unknown key"
        more = len(errors) - 1
        if more:
            msg += f" (and {more} more error{'s' if more > 1 else ''})"
        raise ConfigError(msg, path=path, line=line, field=field) from exc


def load_model(model: type[M], path: Path) -> M:
    """Read the YAML file at ``path`` and validate it as ``model``.

    Raises:
        ConfigError: unreadable file, invalid YAML, or a schema violation.
    """
    data, lines = load_yaml_with_lines(path)
    if data is None:
        raise ConfigError("file is empty", path=str(path))
    return validate_model(model, data, path=str(path), lines=lines)
