"""The API reference page, drawn from the app's own OpenAPI schema.

FastAPI's stock /docs page fetches Swagger UI from a CDN; the playground loads nothing from
the internet, so it renders the same schema as a plain page of its own instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

Schema = dict[str, Any]


@dataclass(frozen=True)
class FieldDoc:
    name: str
    type: str
    required: bool
    description: str = ""


@dataclass(frozen=True)
class ResponseDoc:
    status: str
    description: str
    type: str
    fields: list[FieldDoc] = field(default_factory=list)


@dataclass(frozen=True)
class EndpointDoc:
    method: str
    path: str
    summary: str
    description: str
    params: list[FieldDoc]
    body_type: str | None
    body: list[FieldDoc]
    responses: list[ResponseDoc]

    @property
    def anchor(self) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", self.path.lower()).strip("-")
        return f"{self.method.lower()}-{slug}"


def _resolve(schema: Schema, spec: Schema) -> Schema:
    ref = schema.get("$ref")
    if ref:
        return dict(spec["components"]["schemas"][ref.rsplit("/", 1)[-1]])
    return schema


def type_name(schema: Schema | bool) -> str:
    if not isinstance(schema, dict):  # `additionalProperties: true` and the like
        return "any"
    if "$ref" in schema:
        return str(schema["$ref"].rsplit("/", 1)[-1])
    if "anyOf" in schema:
        return " | ".join(type_name(s) for s in schema["anyOf"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list[{type_name(schema.get('items', {}))}]"
    if kind == "object" and "additionalProperties" in schema:
        return f"dict[str, {type_name(schema['additionalProperties'])}]"
    if "enum" in schema:
        return " | ".join(repr(v) for v in schema["enum"])
    return str(kind)


def fields_of(schema: Schema, spec: Schema) -> list[FieldDoc]:
    schema = _resolve(schema, spec)
    if schema.get("type") == "array":
        schema = _resolve(schema.get("items", {}), spec)
    required = set(schema.get("required", []))
    return [
        FieldDoc(name, type_name(prop), name in required, prop.get("description", ""))
        for name, prop in schema.get("properties", {}).items()
    ]


def _json_schema(content: Schema | None) -> Schema:
    return ((content or {}).get("application/json") or {}).get("schema") or {}


def _endpoint(method: str, path: str, op: Schema, spec: Schema) -> EndpointDoc:
    params = [
        FieldDoc(
            f"{p['name']} ({p.get('in', '')})",
            type_name(p.get("schema", {})),
            bool(p.get("required")),
            p.get("description", ""),
        )
        for p in op.get("parameters", [])
    ]
    body_schema = _json_schema(op.get("requestBody", {}).get("content"))
    responses = []
    for status, reply in sorted(op.get("responses", {}).items()):
        schema = _json_schema(reply.get("content"))
        responses.append(
            ResponseDoc(
                status,
                reply.get("description", ""),
                type_name(schema) if schema else "—",
                fields_of(schema, spec) if schema else [],
            )
        )
    return EndpointDoc(
        method=method.upper(),
        path=path,
        summary=op.get("summary", ""),
        description=op.get("description", ""),
        params=params,
        body_type=type_name(body_schema) if body_schema else None,
        body=fields_of(body_schema, spec) if body_schema else [],
        responses=responses,
    )


def reference(spec: Schema) -> list[EndpointDoc]:
    return [
        _endpoint(method, path, op, spec)
        for path, ops in spec.get("paths", {}).items()
        for method, op in ops.items()
    ]
