"""One run of the whole pipeline: `kgate check` (`check`), `kgate lint` (`lint`), `kgate capture --verify` (`capture_verify`), and the replay of an unchanged run (`fastpath`, `lint_cache`)."""
