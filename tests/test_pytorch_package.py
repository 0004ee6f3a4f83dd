"""guideloom.pytorch is a package, as in GuideLoom 1.1: rddac's datasets at its top and 1.1's
submodules (``stateful_dataloader``, ``_move_data_to_device``) under it; without torch each
import names the extra to install."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]


def test_the_loader_module_path_of_guideloom_11() -> None:
    import guideloom
    import guideloom.pytorch
    from guideloom.pytorch import stateful_dataloader
    from guideloom.pytorch.stateful_dataloader import StatefulDataLoader

    assert hasattr(guideloom.pytorch, "__path__")  # a package, not a module
    assert StatefulDataLoader is guideloom.StatefulDataLoader
    assert StatefulDataLoader is guideloom.pytorch.StatefulDataLoader
    assert stateful_dataloader.__all__ == ["StatefulDataLoader"]
    for name in ("RDDACDataset", "DDACSDataset", "ViewDataset", "DEFAULT_DATA_DIR"):
        assert hasattr(guideloom.pytorch, name), name


@dataclasses.dataclass
class Batch:
    x: object
    names: list[str]
    derived: object = dataclasses.field(init=False, default=None)


def test_move_data_to_device_walks_tensors_dataclasses_mappings_and_sequences() -> None:
    from guideloom.pytorch._move_data_to_device import _move_data_to_device

    data = {"a": torch.ones(2), "b": [torch.zeros(1), (torch.arange(3), "text")],
            "c": Batch(torch.ones(1), ["n"]), "d": 7}
    moved = _move_data_to_device(data, torch.device("meta"), non_blocking=True)
    assert moved["a"].device.type == "meta"
    assert [t.device.type for t in (moved["b"][0], moved["b"][1][0])] == ["meta", "meta"]
    assert moved["b"][1][1] == "text"
    assert isinstance(moved["b"][1], tuple)
    assert isinstance(moved["c"], Batch)
    assert moved["c"].x.device.type == "meta"
    assert moved["c"].names == ["n"]
    assert moved["d"] == 7
    assert data["a"].device.type == "cpu"  # the input is not changed


@pytest.mark.parametrize("module", ["guideloom.pytorch", "guideloom.pytorch.stateful_dataloader",
                                    "guideloom.pytorch._move_data_to_device"])
def test_without_torch_each_import_names_the_extra(module: str) -> None:
    code = ("import sys; sys.modules['torch'] = None\n"
            "import guideloom\n"
            f"try:\n    import {module}\n"
            "except ImportError as exc:\n    print('refused:', exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=60, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert done.returncode == 0, done.stderr
    assert 'refused: the loader needs PyTorch: pip install "guideloom[torch]"' in done.stdout


def test_copies_are_queued_without_waiting_on_cuda_only() -> None:
    from guideloom.pytorch.stateful_dataloader import _use_non_blocking_transfer

    assert _use_non_blocking_transfer(torch.device("cuda"))
    assert _use_non_blocking_transfer(torch.device("cuda", 1))
    assert not _use_non_blocking_transfer(torch.device("cpu"))
    assert not _use_non_blocking_transfer(torch.device("mps"))
