"""Fixtures of the config tests: the bundled SKU catalog."""

from __future__ import annotations

import pytest

from nvtest.config.skus import Catalog, load_catalog


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return load_catalog()
