"""The shared model every stage reads and writes: findings, the rule contract, selection, suppression, configuration, errors and a run's result."""
