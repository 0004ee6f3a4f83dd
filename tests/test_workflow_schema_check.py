"""The workflow schema is checked without ``jsonschema`` (whose format checkers cost seconds to
import with Jupyter installed), with the same verdicts and messages as ``jsonschema``.

Every shipped workflow and a document using every section are mutated key by key (removed,
replaced by values of every TOML type, joined by an unknown key); both validators must find the
same violations in the same order, and the user's message must be the same.
"""

from __future__ import annotations

import copy
import datetime
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from guideloom.workflows import shipped_workflows
from jsonschema import Draft202012Validator, validators

from guideloom.workflow.load import read_document
from guideloom.workflow.schema import describe_error, workflow_schema
from guideloom.workflow.schema_check import SubsetValidator, toml_integer

# jsonschema with TOML's types: a float (2.0) is no "integer" (JSON Schema itself says it is)
TomlValidator = validators.extend(
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", toml_integer))

RICH = {
    "name": "rich", "description": "every section", "python_path": ["lib", ".."],
    "paths_relative_to": "cwd",
    "dataset": {"data_dir": "demo-data", "manifest": "demo-data/metadata.json"},
    "view": {"name": "mine", "fields": {"force": "force_data",
                                        "head": {"field": "force_data", "timesteps": [0, 1]},
                                        "first": {"field": "force_data", "timesteps": 0}}},
    "filter": {"sim_ids": [1, "2"], "where": {"split": "train", "bhf": {"in": [100, 300]},
                                              "t": {"ge": 25.0, "lt": 30}}},
    "transforms": {"record": "pkg.mod:fn", "fields": {"force": "pkg.mod:scale"}},
    "output": {"kind": "storage", "path": "out", "compression": "none", "partition_size": 4,
               "storage": {"class": "StreamStorage", "dtype": {"force": "<f4"},
                           "format": "pickle", "format_factory": "pkg.mod:make"}},
    "run": {"on_error": "skip", "verify_crc": True, "scheduler": "local:2",
            "dashboard": "127.0.0.1:8787",
            "cluster": {"kind": "slurm", "jobs": 2, "config_file": "jq.yaml",
                        "wait_timeout": 30.5, "job_options": {"queue": "normal"}}},
}
REPLACEMENTS = ["", "x", "sync\n", "a.b:c\n", "npz", "tcp://h:1", "a.b:c", "1bad", 0, -1, 3,
                2.0, 0.5, True, False,
                [], [1], ["x", 2], {}, {"field": "f"}, {"in": []}, {"zz": 1},
                datetime.date(2026, 1, 1)]


def paths(node: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every key path and list index in a document."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*prefix, key)
            yield from paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield (*prefix, i)
            yield from paths(value, (*prefix, i))


def mutants(doc: dict) -> Iterator[dict]:
    yield doc
    for path in list(paths(doc)):
        parent_path, last = path[:-1], path[-1]
        for replacement in (*REPLACEMENTS, "<delete>", "<unknown sibling>"):
            new = copy.deepcopy(doc)
            parent = new
            for part in parent_path:
                parent = parent[part]
            if replacement == "<delete>":
                del parent[last]
            elif replacement == "<unknown sibling>":
                if not isinstance(parent, dict):
                    continue
                parent["no_such_key"] = 1
            else:
                parent[last] = copy.deepcopy(replacement)
            yield new


def summary(errors) -> list:
    return [(tuple(e.absolute_path), e.validator, repr(e.validator_value), repr(e.instance),
             summary(e.context or ())) for e in errors]


def documents() -> list[dict]:
    docs = [read_document(p) for p in shipped_workflows().values()]
    assert len(docs) >= 4
    return [m for doc in [*docs, RICH] for m in mutants(doc)]


def test_the_schema_is_valid_draft_2020_12_and_uses_only_handled_keywords():
    Draft202012Validator.check_schema(workflow_schema())
    SubsetValidator(workflow_schema())


@pytest.mark.slow
def test_same_violations_in_the_same_order_and_the_same_message_as_jsonschema():
    reference = TomlValidator(workflow_schema())
    ours = SubsetValidator(workflow_schema())
    docs = documents()
    invalid = 0
    for doc in docs:
        want = list(reference.iter_errors(doc))
        got = list(ours.iter_errors(doc))
        assert summary(got) == summary(want), doc
        if want:
            invalid += 1
            order = lambda e: (tuple(str(p) for p in e.absolute_path), -len(e.absolute_path))  # noqa: E731
            assert describe_error(sorted(got, key=order)[0]) == \
                describe_error(sorted(want, key=order)[0])
    assert invalid > 500
    assert len(docs) - invalid > 20


@pytest.mark.parametrize("keyword", ["patternProperties", "format", "oneOf"])
def test_a_schema_with_an_unhandled_keyword_is_refused(keyword):
    schema = {"type": "object", "properties": {"a": {keyword: {}}}}
    with pytest.raises(ValueError, match=f"keyword '{keyword}' at #/properties/a"):
        SubsetValidator(schema)


def test_workflow_run_imports_no_jsonschema_and_no_format_checker(tmp_path):
    """What ``guideloom run`` / ``--dry-run`` import to validate a file loads no jsonschema (so
    no ``jsonschema._format``, no ``rfc3987_syntax``), whatever else is installed."""
    code = textwrap.dedent("""
        import sys
        from guideloom.cli.parser import build_parser
        import guideloom.workflow
        from guideloom.workflow import load_workflow, validate_document
        from guideloom.workflows import find_shipped
        from guideloom.workflow.load import read_document
        validate_document(read_document(find_shipped("force_signals")), "force_signals.toml")
        bad = sorted(m for m in sys.modules
                     if m.split(".")[0] in ("jsonschema", "rfc3987_syntax", "rfc3987", "lark"))
        print(bad)
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(("line", "key", "words"), [
    ('scheduler = "sync\\n"', "run.scheduler", "got 'sync\\n'"),
    ('scheduler = "local:2\\n"', "run.scheduler", "got 'local:2\\n'"),
    ("partition_size = 2.0", "output.partition_size", "expected an integer, got 2.0"),
])
def test_a_trailing_newline_or_a_whole_float_is_refused_when_the_file_is_read(
        tmp_path, line, key, words):
    """TOML's types, checked as TOML's: ``"sync\\n"`` is no scheduler (a pattern's ``$`` took
    it) and ``2.0`` no integer (JSON Schema's "integer" took it); both failed inside the job."""
    from guideloom.workflow import WorkflowError
    from guideloom.workflow.schema import validate_document

    text = shipped_workflows()["force_signals"].read_text()
    if line.startswith("partition_size"):
        text = text.replace("partition_size = 4", line)
    else:
        text = text.replace("[run]\n", f"[run]\n{line}\n")
    path = tmp_path / "job.toml"
    path.write_text(text)
    doc = read_document(path)
    with pytest.raises(WorkflowError) as info:
        validate_document(doc, str(path))
    assert info.value.key == key, str(info.value)
    assert words in str(info.value), str(info.value)
    reference = TomlValidator(workflow_schema())  # jsonschema, with TOML's integer, agrees
    assert summary(SubsetValidator(workflow_schema()).iter_errors(doc)) == \
        summary(reference.iter_errors(doc)) != []


def test_same_verdicts_as_jsonschema_on_the_typed_keys():
    """The fast sibling of the slow comparison: every replacement at the keys holding an
    integer or a pattern-checked string."""
    reference = TomlValidator(workflow_schema())
    ours = SubsetValidator(workflow_schema())
    keys = {("output", "partition_size"), ("run", "scheduler"), ("run", "dashboard"),
            ("run", "cluster", "jobs"), ("transforms", "record")}
    checked = 0
    for path in keys:
        for replacement in REPLACEMENTS:
            new = copy.deepcopy(RICH)
            parent = new
            for part in path[:-1]:
                parent = parent[part]
            parent[path[-1]] = copy.deepcopy(replacement)
            assert summary(ours.iter_errors(new)) == summary(reference.iter_errors(new)), new
            checked += 1
    assert checked == len(keys) * len(REPLACEMENTS)
