"""The plugin is tested with pytester: a check module and a run_config.json in a temporary
directory, and pytest started on them in a subprocess (the plugin installs signal handlers
and must not touch this session's)."""

from __future__ import annotations

# pytester is loaded by tests/conftest.py: pytest allows pytest_plugins only in the top-level conftest
