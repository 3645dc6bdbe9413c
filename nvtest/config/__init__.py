"""The shared floor's configuration: inventories, SKU profiles, thresholds, suites, overlays,
YAML loading, and where the bundled files are."""
