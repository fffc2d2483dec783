"""flarebench harness: pytest plugin, runner, metrics, reports and gates."""
