"""The plugin is tested with pytester: a check module and a run_config.json in a temporary
directory, and pytest started on them in a subprocess (the plugin installs signal handlers
and must not touch this session's). pytester is enabled for the whole test tree in
pyproject.toml (``-p pytester``): pytest refuses ``pytest_plugins`` in a conftest below the
rootdir."""
