"""Shared fixtures: demo datasets written by the project itself."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from guideloom.demo import make_demo_data

REFERENCE_MANIFEST = Path(__file__).resolve().parents[2] / "shared/reference/rddac-metadata.json"


@pytest.fixture(scope="session")
def demo_zip(tmp_path_factory) -> Path:
    """36 experiments, zipped layout, small scans (read-only: copy before changing it)."""
    root = tmp_path_factory.mktemp("demo_zip")
    make_demo_data(root, n=36, layout="zip", seed=0)
    return root


@pytest.fixture(scope="session")
def demo_loose(tmp_path_factory) -> Path:
    """The same 36 experiments in the loose layout."""
    root = tmp_path_factory.mktemp("demo_loose")
    make_demo_data(root, n=36, layout="loose", seed=0)
    return root


@pytest.fixture
def demo_copy(demo_zip, tmp_path) -> Path:
    """A private copy of the zipped demo dataset that a test may damage."""
    target = tmp_path / "data"
    shutil.copytree(demo_zip, target)
    return target
