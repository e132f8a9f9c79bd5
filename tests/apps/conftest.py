"""Fixtures shared by the command-line tests."""
import os

import pytest


@pytest.fixture
def unreadable_inputs(tmp_path):
    """A directory and a FIFO named like input files, with the problem each must be reported as
    (a FIFO would block a reader forever)."""
    d = tmp_path / "dir.json"
    d.mkdir()
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    return [(str(d), "is a directory"), (str(fifo), "not a regular file")]
