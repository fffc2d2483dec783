"""An example flarebench plugin (see README.md beside this package)."""
