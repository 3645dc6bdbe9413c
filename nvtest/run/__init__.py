"""One run from pytest's side: the plugin (hooks only), stopping on signals, the live view
and the consoles (data printed as it is), drain."""
