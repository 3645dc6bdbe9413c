"""YAML config files validated by pydantic, with errors that name file, line and field.

Every config file of nvtest (SKU profiles, overlays, inventories, suites) is read
through :func:`load_model`, so an unknown key or a missing unit is reported as::

    configs/skus/h100.yaml:42: thresholds.gemm.bf16_tflops.unit: Field required

Reading is bounded, so that a mistaken or hostile file is a configuration error in
well under a second, never a hang or gigabytes of memory:

- at most :data:`MAX_CONFIG_BYTES` are read (``NVTEST_MAX_CONFIG_BYTES`` sets another limit);
- the document may expand to at most :data:`MAX_YAML_NODES` nodes, every use of an alias
  counted (``NVTEST_MAX_YAML_NODES``; an alias bomb stops here), nested at most
  :data:`MAX_YAML_DEPTH` levels; a recursive alias is an error;
- a duplicate key in a mapping is an error (YAML would keep the last silently);
- merge keys (``<<: *common``, ``<<: [*a, *b]``) merge as YAML 1.1 defines them: the
  mapping's own keys first, then each merged mapping's keys it does not have.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import types
import typing
from collections import abc
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from nvtest.errors import ConfigError

__all__ = [
    "KeysFrom",
    "MAX_CONFIG_BYTES",
    "MAX_YAML_DEPTH",
    "MAX_YAML_NODES",
    "limit_from_env",
    "load_model",
    "load_yaml_with_lines",
    "nearest_name",
    "read_bounded",
    "salvage_model",
    "validate_model",
    "validation_problems",
]


def nearest_name(word: str, known: Sequence[str]) -> str | None:
    """The name of ``known`` nearest to ``word`` (difflib, cutoff 0.6), or None: the one
    "did you mean" of every configuration error."""
    near = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return near[0] if near else None


M = TypeVar("M", bound=BaseModel)

LineMap = dict[tuple[str | int, ...], int]

#: Largest configuration file read, bytes (``NVTEST_MAX_CONFIG_BYTES`` overrides).
MAX_CONFIG_BYTES = 16 * 1024 * 1024
#: Most nodes a YAML document may expand to, aliases counted per use (``NVTEST_MAX_YAML_NODES``).
MAX_YAML_NODES = 1_000_000
#: Deepest nesting of mappings and sequences accepted.
MAX_YAML_DEPTH = 100

_MERGE_TAG = "tag:yaml.org,2002:merge"
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def limit_from_env(name: str, default: int) -> int:
    """A positive integer limit from the environment variable ``name``, else ``default``.

    Raises:
        ConfigError: the variable is set to something that is not a positive integer.
    """
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.replace("_", ""))
    except ValueError:
        value = 0
    if value <= 0:
        raise ConfigError(f"must be a positive integer, not {raw!r}", field=name)
    return value


def read_bounded(path: Path, limit: int, *, setting: str) -> bytes:
    """The bytes of ``path``, at most ``limit`` of them (``/dev/zero`` stops at the limit).

    Raises:
        ConfigError: unreadable, or larger than ``limit`` (naming ``setting``, where it is set).
    """
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", path=str(path)) from exc
    if len(data) > limit:
        raise ConfigError(f"larger than {limit} bytes ({setting} sets the limit)", path=str(path))
    return data


class _Reader:
    """Turns a composed YAML node graph into Python data and a line map, within the bounds."""

    def __init__(self, path: str, max_nodes: int) -> None:
        self.path = path
        self.max_nodes = max_nodes
        self.ctor = yaml.constructor.SafeConstructor()
        self.sizes: dict[int, int] = {}

    def error(self, reason: str, node: yaml.Node, field: tuple[str | int, ...] = ()) -> ConfigError:
        name = ".".join(str(p) for p in field) or None
        return ConfigError(reason, path=self.path, line=node.start_mark.line + 1, field=name)

    def size(self, node: yaml.Node, depth: int = 0, active: frozenset[int] = frozenset()) -> int:
        """Nodes ``node`` expands to (memoised per node; aliases count at every use)."""
        key = id(node)
        if key in self.sizes:
            return self.sizes[key]
        if key in active:
            raise self.error("recursive alias: a node contains itself", node)
        if depth > MAX_YAML_DEPTH:
            raise self.error(f"nested deeper than {MAX_YAML_DEPTH} levels", node)
        total = 1
        if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
            inner = active | {key}
            children = [c for kv in node.value for c in kv] if isinstance(node, yaml.MappingNode) else node.value
            for child in children:
                total += self.size(child, depth + 1, inner)
                if total > self.max_nodes:
                    raise self.error(
                        f"the document expands to more than {self.max_nodes} nodes (aliases repeated: "
                        "an alias bomb?); NVTEST_MAX_YAML_NODES sets the limit",
                        node,
                    )
        self.sizes[key] = total
        return total

    def walk(self, node: yaml.Node, path: tuple[str | int, ...], out: LineMap) -> Any:
        out.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            return self.mapping(node, path, out, merged=False)
        if isinstance(node, yaml.SequenceNode):
            return [self.walk(item, path + (i,), out) for i, item in enumerate(node.value)]
        if node.tag == _MERGE_TAG:
            raise self.error("`<<` (merge key) is only valid as a mapping key", node, path)
        return self.ctor.construct_object(node)

    def mapping(
        self, node: yaml.MappingNode, path: tuple[str | int, ...], out: LineMap, *, merged: bool
    ) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        first: dict[Any, int] = {}
        merges: list[yaml.Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merges.append(value_node)
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                raise self.error("a mapping key must be a plain value, not a mapping or a list", key_node, path)
            key = self.ctor.construct_object(key_node)
            line = key_node.start_mark.line + 1
            if key in first:
                raise self.error(f"duplicate key {key!r} (first at line {first[key]})", key_node, path + (key,))
            first[key] = line
            result[key] = self.walk(value_node, path + (key,), out)
            if merged:
                out.setdefault(path + (key,), line)
            else:
                out[path + (key,)] = line
        for value in merges:
            sources = value.value if isinstance(value, yaml.SequenceNode) else [value]
            for src in sources:
                if not isinstance(src, yaml.MappingNode):
                    raise self.error("`<<` merges a mapping, or a list of mappings (`<<: [*a, *b]`)", src, path)
                for k, v in self.mapping(src, path, out, merged=True).items():
                    result.setdefault(k, v)
        return result


def load_yaml_with_lines(path: Path) -> tuple[Any, LineMap]:
    """Read a YAML file; return its data and a map from key path to 1-based line.

    Raises:
        ConfigError: the file cannot be read, is too large, is not valid YAML, expands past
            the node limit, nests too deep, has a recursive alias, a duplicate key or a bad
            merge key (with its line).
    """
    data = read_bounded(
        path, limit_from_env("NVTEST_MAX_CONFIG_BYTES", MAX_CONFIG_BYTES), setting="NVTEST_MAX_CONFIG_BYTES"
    )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            "not UTF-8 text (is this a YAML file?)", path=str(path), line=text_line_of(data, exc.start)
        ) from exc
    try:
        root = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"invalid YAML: {problem}", path=str(path), line=line) from exc
    except RecursionError as exc:
        raise ConfigError(f"invalid YAML: nested deeper than {MAX_YAML_DEPTH} levels", path=str(path)) from exc
    lines: LineMap = {}
    if root is None:
        return None, lines
    reader = _Reader(str(path), limit_from_env("NVTEST_MAX_YAML_NODES", MAX_YAML_NODES))
    reader.size(root)
    try:
        return reader.walk(root, (), lines), lines
    except yaml.YAMLError as exc:  # a scalar its tag cannot construct (a bad !!timestamp)
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(
            f"invalid YAML: {getattr(exc, 'problem', None) or exc}",
            path=str(path),
            line=mark.line + 1 if mark else None,
        ) from exc


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
        [(_, first), *more] = validation_problems(model, exc, path=path, lines=lines)
        raise _and_more(first, len(more)) from exc


def _and_more(err: ConfigError, more: int) -> ConfigError:
    """``err`` with `` (and 2 more errors)`` where there are more."""
    if not more:
        return err
    return ConfigError(
        f"{err.reason} (and {more} more error{'s' if more > 1 else ''})", path=err.path, line=err.line, field=err.field
    )


def validation_problems(
    model: type[BaseModel], exc: ValidationError, *, path: str, lines: LineMap | None = None
) -> list[tuple[tuple[Any, ...], ConfigError]]:
    """Every error of ``exc`` (raised validating ``model``) as (its location, a ConfigError
    naming file, line, dotted key and the nearest name of a misspelt key); unknown keys first
    (an unknown key explains a "field required" beside it: a typo'd key)."""
    errors = sorted(exc.errors(), key=lambda e: e.get("type") != "extra_forbidden")
    out: list[tuple[tuple[Any, ...], ConfigError]] = []
    for err in errors:
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
            msg = "unknown key" + _nearest_key(model, loc)
        elif err.get("type") == "literal_error" and loc and loc[-1] == "[key]":  # a mapping of fixed keys
            known = re.findall(r"'([^']*)'", str((err.get("ctx") or {}).get("expected", "")))
            loc, near = loc[:-1], nearest_name(str(loc[-2]), known)
            field = ".".join(str(p) for p in loc)
            msg = "unknown key" + (f" (did you mean {near!r}?)" if near else f"; known: {', '.join(known)}")
        out.append((loc, ConfigError(msg, path=path, line=line, field=field)))
    return out


#: The most rounds of :func:`salvage_model` (each cuts at least one part out).
MAX_SALVAGE_ROUNDS = 64


def salvage_model(
    model: type[M],
    data: Any,
    *,
    path: str,
    lines: LineMap | None,
    part: abc.Callable[[tuple[Any, ...]], tuple[Any, ...] | None],
    cut: list[ConfigError],
) -> M:
    """Validate ``data`` as ``model``, leaving out each part that fails and may be left out.

    ``part(loc)`` is the location of the part an error at ``loc`` breaks that the file means
    the same without (a key of a section: ``("recipe", "gate", "disk_fre_gib")``), or None
    where the file's meaning itself is broken. Each error of a part left out is appended to
    ``cut`` (file, line, dotted key, nearest name); the model of the rest is returned.
    ``data`` is not changed.

    Raises:
        ConfigError: an error that no part explains (as :func:`validate_model` says it).
    """
    import copy

    rest = copy.deepcopy(data)
    for _ in range(MAX_SALVAGE_ROUNDS):
        try:
            return model.model_validate(rest)
        except ValidationError as exc:
            found = validation_problems(model, exc, path=path, lines=lines)
            error = exc
        parts = [part(loc) for loc, _ in found]
        whole = [e for p, (_, e) in zip(parts, found, strict=True) if p is None]
        if whole:  # the error that no part explains is the one to name
            raise _and_more(whole[0], len(found) - 1) from error
        if not all(_drop(rest, p) for p in sorted({p for p in parts if p}, key=len, reverse=True)):
            break
        seen = {(e.field, e.reason) for e in cut}
        cut.extend(e for _, e in found if (e.field, e.reason) not in seen)
    return validate_model(model, data, path=path, lines=lines)


def _drop(data: Any, loc: tuple[Any, ...]) -> bool:
    """Remove the key at ``loc`` of nested mappings; False where there is none."""
    for step in loc[:-1]:
        data = data.get(step) if isinstance(data, dict) else None
    if isinstance(data, dict) and loc and loc[-1] in data:
        del data[loc[-1]]
        return True
    return False


@dataclasses.dataclass(frozen=True)
class KeysFrom:
    """``Annotated`` metadata: the mapping is validated by ``model`` (in a validator), so an
    unknown key in it is suggested from ``model``'s fields."""

    model: type[BaseModel]


def _model_in(tp: Any) -> Any:
    """``X`` of ``X | None`` (the model among a union's members), the model an ``Annotated``
    type names in its metadata (a mapping validated by a model), else ``tp``."""
    if typing.get_origin(tp) is typing.Annotated:
        args = typing.get_args(tp)
        return next((a.model for a in args[1:] if isinstance(a, KeysFrom)), _model_in(args[0]))
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return next((a for a in typing.get_args(tp) if isinstance(a, type) and issubclass(a, BaseModel)), None)
    return tp


def _keys_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The keys the model at ``loc`` (a path of keys and indices from ``model``) takes;
    [] where that is not a model (a free-form mapping)."""
    tp: Any = model
    for step in loc:
        tp = _model_in(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            field = tp.model_fields.get(str(step))
            if field is None:
                return []
            tp = next((m.model for m in field.metadata if isinstance(m, KeysFrom)), field.annotation)
        elif typing.get_origin(tp) in (dict, list, tuple, abc.Mapping, abc.Sequence) and typing.get_args(tp):
            tp = typing.get_args(tp)[-1]  # a mapping's value, a list's item
        else:
            return []
    tp = _model_in(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [f.alias or name for name, f in tp.model_fields.items()]
    return []


def _nearest_key(model: type[BaseModel], loc: tuple[Any, ...]) -> str:
    """`` (did you mean 'min'?)`` for an unknown key at ``loc``, else ``""``."""
    if not loc:
        return ""
    near = nearest_name(str(loc[-1]), _keys_at(model, loc[:-1]))
    return f" (did you mean {near!r}?)" if near else ""


def load_model(model: type[M], path: Path) -> M:
    """Read the YAML file at ``path`` and validate it as ``model``.

    Raises:
        ConfigError: unreadable file, invalid YAML, or a schema violation.
    """
    data, lines = load_yaml_with_lines(path)
    if data is None:
        raise ConfigError("file is empty", path=str(path))
    return validate_model(model, data, path=str(path), lines=lines)
