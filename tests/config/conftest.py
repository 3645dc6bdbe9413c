"""Fixtures of the config tests: the bundled SKU catalog."""

from __future__ import annotations

import pytest

from nvtest.config.skus import Catalog, load_catalog


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    """The bundled SKU profiles, loaded once."""
    return load_catalog()
