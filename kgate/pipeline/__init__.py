"""One run of the whole pipeline: `kgate check` (`check`), `kgate lint` (`lint`), and the replay of an unchanged run (`fastpath`, `lint_cache`)."""
