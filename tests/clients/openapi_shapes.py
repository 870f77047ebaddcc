"""Comparing a pydantic model with an OpenAPI schema by structure: property names, which are required,
and each property's type (followed through `$ref`s on both sides, so names of components do not matter;
titles, descriptions, formats and numeric bounds are left out: the client reads, it does not police)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import TypeAdapter

Shape = Any


def model_schema(model: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The model's JSON schema and its `$defs`."""
    schema = TypeAdapter(model).json_schema(ref_template="#/$defs/{model}")
    defs: dict[str, Any] = schema.pop("$defs", {})
    return schema, defs


def shape(schema: dict[str, Any], defs: dict[str, Any]) -> Shape:
    """A canonical, name-free description of what a schema accepts."""
    if "$ref" in schema:
        return shape(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in schema or "oneOf" in schema:
        options = [shape(option, defs) for option in schema.get("anyOf", schema.get("oneOf"))]
        options.sort(key=lambda option: json.dumps(option, sort_keys=True))
        return options[0] if len(options) == 1 else {"anyOf": options}
    if len(schema.get("allOf", [])) == 1:
        return shape(schema["allOf"][0], defs)
    if "const" in schema:
        return {"enum": [schema["const"]]}
    if "enum" in schema:
        return {"enum": sorted(schema["enum"])}
    kind = schema.get("type")
    if kind == "array":
        return {"array": shape(schema.get("items", {}), defs)}
    if kind == "object" or "properties" in schema:
        if "properties" in schema:
            props = {key: shape(value, defs) for key, value in schema["properties"].items()}
            return {"object": props, "required": sorted(schema.get("required", []))}
        extra = schema.get("additionalProperties")
        return {"map": shape(extra, defs) if isinstance(extra, dict) else "any"}
    if kind in ("string", "integer", "number", "boolean", "null"):
        return kind
    return "any"


def differences(client: Shape, server: Shape, where: str) -> list[str]:
    """Where the client's shape and the server's disagree, as readable lines (empty when they agree)."""
    if client == server:
        return []
    if isinstance(client, dict) and isinstance(server, dict):
        if "object" in client and "object" in server:
            return _object_differences(client, server, where)
        if "array" in client and "array" in server:
            return differences(client["array"], server["array"], f"{where}[]")
        if "map" in client and "map" in server:
            return differences(client["map"], server["map"], f"{where}{{}}")
        if "anyOf" in client and "anyOf" in server:
            pair = _nullable_pair(client, server)
            if pair:
                return differences(*pair, where)
    return [f"{where}: client {_show(client)} vs server {_show(server)}"]


def _object_differences(client: Shape, server: Shape, where: str) -> list[str]:
    lines: list[str] = []
    mine, theirs = client["object"], server["object"]
    for key in sorted(theirs.keys() - mine.keys()):
        lines.append(f"{where}.{key}: the server declares it, the client model has no field for it")
    for key in sorted(mine.keys() - theirs.keys()):
        lines.append(f"{where}.{key}: the client model has it, the server does not declare it")
    for key in sorted(mine.keys() & theirs.keys()):
        if (key in client["required"]) != (key in server["required"]):
            lines.append(
                f"{where}.{key}: required by the {'client' if key in client['required'] else 'server'} only"
            )
        lines.extend(differences(mine[key], theirs[key], f"{where}.{key}"))
    return lines


def _nullable_pair(client: Shape, server: Shape) -> tuple[Shape, Shape] | None:
    """`X | null` on both sides: compare the two X."""
    a = [option for option in client["anyOf"] if option != "null"]
    b = [option for option in server["anyOf"] if option != "null"]
    both_null = "null" in client["anyOf"] and "null" in server["anyOf"]
    return (a[0], b[0]) if both_null and len(a) == len(b) == 1 else None


def _show(value: Shape) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) < 160 else text[:157] + "..."
