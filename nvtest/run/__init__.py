"""One run from pytest's side: the plugin (hooks only), the live view, drain."""
