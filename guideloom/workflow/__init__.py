"""Workflow files: export jobs described as data (TOML), validated before any work starts.

A workflow file names the dataset, the view (published or ad hoc), the filters, the transforms
(``module:function`` references), the output and the error policy; :func:`load_workflow` checks
all of it and :meth:`Workflow.to_spec` builds the same :class:`~guideloom.export.ExportSpec` the
Python API builds. See ``docs/workflows.md``.
"""

from guideloom.workflow.filters import Condition, WhereFilter
from guideloom.workflow.load import Workflow, load_workflow, read_document
from guideloom.workflow.references import resolve_reference
from guideloom.workflow.schema import WorkflowError, validate_document, workflow_schema

__all__ = [
    "Condition",
    "WhereFilter",
    "Workflow",
    "WorkflowError",
    "load_workflow",
    "read_document",
    "resolve_reference",
    "validate_document",
    "workflow_schema",
]
