"""Checked by mypy (tests/test_typing.py), never run: the classes the executor passes to a format
satisfy the protocols of :mod:`guideloom.formats.base`, and the documents it builds have the
shapes of :mod:`guideloom.formats.manifest_types`."""

from __future__ import annotations

from guideloom.export.run import ExportResult
from guideloom.export.spec import FieldSchema, Partition
from guideloom.export.staging import Staging
from guideloom.formats.base import Part, Schema, Stage
from guideloom.formats.manifest_types import ExportManifest, PartitionSummary
from guideloom.reader import Export


def staging_is_a_stage(staging: Staging) -> Stage:
    return staging


def partition_is_a_part(partition: Partition) -> Part:
    return partition


def field_schema_is_a_schema(schema: FieldSchema) -> Schema:
    return schema


def results_hold_typed_documents(result: ExportResult) -> tuple[ExportManifest, PartitionSummary]:
    return result.manifest, result.summaries[0]


def an_export_holds_its_manifest(export: Export) -> int:
    return export.manifest["count"]


def markers_are_summaries(staging: Staging) -> list[PartitionSummary]:
    return list(staging.markers().values())
