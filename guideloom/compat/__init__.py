"""Compatibility with guideloom's predecessors: rddac 2.0, ddacs 3.2 and GuideLoom 1.1.

The real compatibility code lives here: rddac's and ddacs' plots (:mod:`.visualization`,
:mod:`.ddacs_visualization`, loading matplotlib through :mod:`.plot_backend`), the
``mlcroissant.Dataset`` face of a dataset (:mod:`.mlc`). GuideLoom 1.1's file readers and
file-backend adapter stay in :mod:`guideloom.storage` (``file_compat``, ``io_compat``): the
storages use them and they extend the storages' own classes. The predecessors' module paths
(``guideloom.spec``, ``guideloom.io.mmap``, ``guideloom.types.primitive``, ...) are thin stubs
written by :mod:`.generate` from the one table :mod:`.aliases`.

Importing this package imports nothing else.
"""
