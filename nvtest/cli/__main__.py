"""``python -m nvtest.cli``: the same as the ``nvtest`` command."""

from __future__ import annotations

from nvtest.cli.app import main

main()
