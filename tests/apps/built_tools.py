"""What every command-line test module needs of the tool it runs: a module-wide, automatic fixture
that skips the module when the binary (the path CTest passes in $MLA_*_BIN, or a build-tree path for
a run by hand) is not built."""
from pathlib import Path

import pytest


def skip_unless_built(path):
    """Assign the result to a module-level name: pytest then uses it for every test of the module."""

    @pytest.fixture(scope="module", autouse=True)
    def binary_exists():
        if not Path(path).exists():
            pytest.skip(f"{Path(path).name} not built at {path}")

    return binary_exists
