"""The dataset identities guideloom knows and what a manifest may leave open.

:class:`DatasetSpec` names the pieces of a dataset a manifest leaves a choice about (the index
table, the field-map record set, the member pattern); :data:`RDDAC_SPEC` and
:data:`DDACS_SPEC` are rddac 2.0's and ddacs 3.2's identities. Public through
:mod:`guideloom.select.manifest` (and ``guideloom.croissant``, ``guideloom.spec``).
"""

from __future__ import annotations

from dataclasses import dataclass

MANIFEST_NAME = "metadata.json"

#: The data directory rddac and ddacs default to.
DEFAULT_DATA_DIR = "./data"


@dataclass(frozen=True)
class DatasetSpec:
    """How to find the pieces of a dataset where the manifest leaves a choice.

    The first fields are rddac 2.0's / ddacs 3.2's ``DatasetSpec`` fields, in their order; all
    have defaults here. guideloom reads the manifest first: ``process_parameters_file`` and
    ``field_map_record_set`` are preferred when the manifest offers several candidates,
    ``metadata_file`` names the manifest in ``data_dir`` and ``default_data_dir`` is the default
    data directory; the identity fields (``name``, ``prog``, ``dataset_doi``,
    ``default_version``, ``darus_base_url``, ``small_test_files``, ``id_format``,
    ``default_field_data_type``) are kept for code that reads them.

    Args:
        name: Display name (``"RDDAC"``).
        prog: Command-line program name (``"rddac"``).
        dataset_doi: DaRUS persistent identifier.
        default_version: Dataset version its downloader fetches by default.
        darus_base_url: DaRUS instance.
        process_parameters_file: Preferred index table file name.
        metadata_file: The manifest's file name inside ``data_dir``.
        id_column: Index column holding the experiment id; default: the index record set's key.
        id_format: How rddac formats an id as a member name (``"{:04d}"`` -> ``0042.h5``).
        small_test_files: Files of the small download.
        default_data_dir: The data directory when none is given.
        field_map_record_set: Preferred ``@id`` of the field-map record set.
        default_field_data_type: ``dataType`` rddac gives a view field whose source has none.
        index_file: File name of the index table, strictly; default: the CSV ``FileObject``
            that the index record set reads.
        field_map: ``@id`` of the record set that maps field names to HDF5 paths, strictly;
            default: the record set whose fields read a ``FileSet`` through a ``regex``
            transform.
        member_pattern: Regular expression for HDF5 file names (loose or zip members); its group
            ``id`` is the experiment id, so ``0042.h5`` and ``42.h5`` both name id 42.
    """

    name: str = ""
    prog: str = ""
    dataset_doi: str = ""
    default_version: str = ""
    darus_base_url: str = "https://darus.uni-stuttgart.de"
    process_parameters_file: str = "process_parameters.csv"
    metadata_file: str = MANIFEST_NAME
    id_column: str | None = None
    id_format: str = "{}"
    small_test_files: tuple[str, ...] = ()
    default_data_dir: str = DEFAULT_DATA_DIR
    field_map_record_set: str = "field-map"
    default_field_data_type: str = "sc:Float"
    index_file: str | None = None
    field_map: str | None = None
    member_pattern: str = r"^(?P<id>\d+)\.h5$"


#: rddac 2.0's dataset identity (what ``rddac.RDDAC_SPEC`` holds).
RDDAC_SPEC = DatasetSpec(
    name="RDDAC",
    prog="rddac",
    dataset_doi="doi:10.18419/DARUS-5589",
    default_version="2.0",
    id_column="index",
    id_format="{:04d}",
    small_test_files=("process_parameters.csv", "metadata.json", "sample.zip"),
)

#: The experiment id of ddacs 3.2's sample download (``ddacs.spec.DDACS_SAMPLE_SIM_ID``): the
#: archive ``<id>.zip`` among :data:`DDACS_SPEC`'s small test files.
DDACS_SAMPLE_SIM_ID = 258864

#: ddacs 3.2's dataset identity (what ``ddacs.DDACS_SPEC`` holds).
DDACS_SPEC = DatasetSpec(
    name="DDACS",
    prog="ddacs",
    dataset_doi="doi:10.18419/DARUS-4801",
    default_version="3.0",
    id_column="index",
    small_test_files=("process_parameters.csv", "metadata.json", f"{DDACS_SAMPLE_SIM_ID}.zip"),
)

#: The preferred ``@id`` of the field-map record set, under ddacs 3.2's module-level name
#: (``ddacs.croissant.FIELD_MAP_RECORD_SET``, :data:`DDACS_SPEC`'s ``field_map_record_set``).
FIELD_MAP_RECORD_SET = DDACS_SPEC.field_map_record_set

#: The ``dataType`` a view field without one gets, under ddacs 3.2's module-level name
#: (``ddacs.croissant.DEFAULT_FIELD_DATA_TYPE``, :data:`DDACS_SPEC`'s
#: ``default_field_data_type``).
DEFAULT_FIELD_DATA_TYPE = DDACS_SPEC.default_field_data_type
