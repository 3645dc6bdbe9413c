"""One run from pytest's side: the plugin (hooks only), stopping on signals, the live view,
drain. (The consoles every verb prints with are :mod:`nvtest.report.console`.)"""
