"""`phalanx explain [FIELD]`: a TrainingJob's fields, their types, defaults and rules, offline.

Why from the CRD's schema: it is generated from the models, so this prints what `kubectl explain`
prints on a cluster (plus defaults and validation rules) without needing one.
"""

from __future__ import annotations

import textwrap
from typing import Any

from phalanx.models import API_VERSION, KIND
from phalanx.models.crdgen import openapi_schema

Schema = dict[str, Any]


class UnknownFieldError(LookupError):
    """The path names no field; the message lists the fields that exist there."""


def _type(node: Schema) -> str:
    kind = node.get("type")
    if kind == "array":
        return f"[]{_type(node.get('items', {}))}"
    if kind == "object" and "properties" not in node and node.get("additionalProperties"):
        return f"map[string]{_type(node['additionalProperties'])}"
    if node.get("x-kubernetes-int-or-string"):
        return "IntOrString"
    if "enum" in node:
        return f"{kind} ({' | '.join(map(str, node['enum']))})"
    return str(kind or "Object").replace("object", "Object")


def _children(node: Schema) -> Schema:
    if node.get("type") == "array":
        node = node.get("items", {})
    properties: Schema = node.get("properties", {})
    return properties


def find(path: str) -> tuple[str, Schema]:
    """The schema of `path` (`spec.replicas`, or `trainingjob.spec.replicas` as kubectl takes)."""
    parts = [p for p in path.split(".") if p]
    if parts and parts[0].lower() in ("trainingjob", "trainingjobs", "tj"):
        parts = parts[1:]
    node = openapi_schema()
    for index, part in enumerate(parts):
        children = _children(node)
        if part not in children:
            where = ".".join(parts[:index]) or KIND
            raise UnknownFieldError(
                f'field "{part}" does not exist in {where}; fields there: {", ".join(children)}'
            )
        node = children[part]
    return ".".join(parts), node


def _wrap(text: str, indent: str) -> str:
    paragraphs = [textwrap.fill(p, 96, initial_indent=indent, subsequent_indent=indent)
                  for p in text.split("\n\n")]  # fmt: skip
    return "\n".join(paragraphs)


def explain(path: str = "") -> str:
    """Text like `kubectl explain`, with each field's default and the object's rules."""
    name, node = find(path)
    lines = [f"KIND:     {KIND}", f"VERSION:  {API_VERSION}", ""]
    if name:
        lines += [f"FIELD: {name.rsplit('.', 1)[-1]} <{_type(node)}>", ""]
    lines += ["DESCRIPTION:", _wrap(node.get("description", "<empty>"), "    "), ""]
    rules = node.get("x-kubernetes-validations", [])
    if node.get("type") == "array":
        rules = rules + node.get("items", {}).get("x-kubernetes-validations", [])
    if rules:
        lines += ["RULES:", *(_wrap(r["message"], "    ") for r in rules), ""]
    children = _children(node)
    if children:
        required = set((node.get("items", node)).get("required", []))
        lines.append("FIELDS:")
        for field, child in children.items():
            flags = " -required-" if field in required else ""
            default = f" (default: {child['default']})" if "default" in child else ""
            lines.append(f"  {field}\t<{_type(child)}>{flags}{default}")
            if child.get("description"):
                lines.append(_wrap(child["description"], "    "))
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"
