"""Schema parsing and compatibility levels, on Apache Avro's schema-resolution checker.

BACKWARD: the new schema can read data written with the old one (reader=new,
writer=old); FORWARD: the old can read the new; FULL: both. The plain levels
compare with the latest version, the ``_TRANSITIVE`` ones with every version.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import avro.errors
import avro.schema
from avro.compatibility import (
    ReaderWriterCompatibilityChecker,
    SchemaCompatibilityType,
    SchemaIncompatibilityType,
)

LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)


class InvalidSchema(ValueError):
    """The text is not a valid Avro schema."""


def parse_schema(text: str) -> avro.schema.Schema:
    """Parse Avro schema JSON; InvalidSchema with the parser's reason otherwise."""
    try:
        json.loads(text)
    except ValueError as exc:
        raise InvalidSchema(f"Invalid schema: not JSON: {exc}") from exc
    try:
        return avro.schema.parse(text)
    except (avro.errors.AvroException, ValueError, TypeError, KeyError) as exc:
        raise InvalidSchema(f"Invalid schema: {exc}") from exc


@dataclass(frozen=True)
class Incompatibility:
    """One reason two schemas are incompatible, in Confluent's terms."""

    error_type: str
    description: str
    additional_info: str
    old_version: int

    def render(self) -> str:
        """Confluent's ``{errorType:'…', description:'…', additionalInfo:'…'}``."""
        return (
            f"{{errorType:'{self.error_type}', description:'{self.description}', "
            f"additionalInfo:'{self.additional_info}'}}"
        )


_DESCRIBE = {
    SchemaIncompatibilityType.reader_field_missing_default_value: (
        "The field '{info}' at path '{path}' in the {reader} schema has no default value and is missing in the "
        "{writer} schema"
    ),
    SchemaIncompatibilityType.type_mismatch: (
        "The type (path '{path}') of a field in the {reader} schema does not match with the {writer} schema"
    ),
    SchemaIncompatibilityType.name_mismatch: "The name of the schema has changed (path '{path}')",
    SchemaIncompatibilityType.missing_union_branch: (
        "The {reader} schema is missing a type inside a union field at path '{path}' in the {writer} schema"
    ),
    SchemaIncompatibilityType.missing_enum_symbols: (
        "The {reader} schema is missing enum symbols '{info}' at path '{path}' in the {writer} schema"
    ),
    SchemaIncompatibilityType.fixed_size_mismatch: (
        "The size of FIXED type field at path '{path}' in the {reader} schema does not match with the {writer} schema"
    ),
}


def _pairwise(
    reader: avro.schema.Schema, writer: avro.schema.Schema, reader_is_new: bool, old_version: int
) -> list[Incompatibility]:
    result = ReaderWriterCompatibilityChecker().get_compatibility(reader, writer)
    if result.compatibility is SchemaCompatibilityType.compatible:
        return []
    path = ", ".join(sorted(result.locations))
    info = ", ".join(sorted(result.messages))
    names = {"reader": "new" if reader_is_new else "old", "writer": "old" if reader_is_new else "new"}
    out = []
    for kind in dict.fromkeys(result.incompatibilities):
        template = _DESCRIBE.get(
            kind, "The {reader} schema cannot read data written with the {writer} schema at '{path}'"
        )
        out.append(
            Incompatibility(
                error_type=kind.name.upper(),
                description=template.format(info=info, path=path, **names),
                additional_info=info,
                old_version=old_version,
            )
        )
    return out


def incompatibilities(
    new: avro.schema.Schema,
    previous: Sequence[tuple[int, avro.schema.Schema]],
    level: str,
) -> list[Incompatibility]:
    """Why ``new`` may not follow ``previous`` (oldest first) under ``level``; [] when it may."""
    level = level.upper()
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    problems: list[Incompatibility] = []
    for version, old in reversed(against):
        if base in ("BACKWARD", "FULL"):
            problems += _pairwise(new, old, True, version)
        if base in ("FORWARD", "FULL"):
            problems += _pairwise(old, new, False, version)
        if problems:
            break
    return problems


def incompatibility_message(
    subject: str, level: str, problems: Sequence[Incompatibility], old_text: str
) -> str:
    """Confluent's 409 message for an incompatible schema."""
    details = [p.render() for p in problems]
    details.append(f"{{oldSchemaVersion: {problems[0].old_version}}}")
    details.append(f"{{oldSchema: '{old_text}'}}")
    details.append(f"{{compatibility: '{level.upper()}'}}")
    return (
        f'Schema being registered is incompatible with an earlier schema for subject "{subject}", '
        f"details: [{', '.join(details)}]"
    )
