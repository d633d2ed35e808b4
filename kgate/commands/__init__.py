"""One module per subcommand; each exposes `run(args) -> int` (the exit code)."""
