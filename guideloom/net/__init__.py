"""The network layer: how guideloom talks HTTP, below the read path and the download command.

:mod:`~guideloom.net.deadline` gives every HTTP request its deadlines (the answer in all, a
minimum rate for bodies), :mod:`~guideloom.net.fetch` fetches one file into place (resumable,
verified, retried), :mod:`~guideloom.net.folder` keeps a download's folder safe where other
users can write, and :mod:`~guideloom.net.dataverse` lists a published Dataverse dataset
(DaRUS: its versions and files). The package itself imports nothing.
"""
