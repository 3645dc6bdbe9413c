"""The plugin is tested with pytester (enabled in tests/conftest.py): a check module and a
run_config.json in a temporary directory, and pytest started on them in a subprocess (the
plugin installs signal handlers and must not touch this session's)."""
