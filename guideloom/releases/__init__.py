"""Published releases: what a Dataverse release holds, downloading it, and serving one locally.

:mod:`~guideloom.releases.release` is ``guideloom info``/``download`` (what a release holds,
what changed between versions, its files fetched in parallel with :mod:`guideloom.net`);
:mod:`~guideloom.releases.server` is ``guideloom serve-release`` (a folder served as a
Dataverse dataset on 127.0.0.1, to rehearse the DaRUS steps offline). The package itself
imports nothing.
"""
