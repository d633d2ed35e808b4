"""A check's run as data (`run`), split into shards (`plan`) and merged back (`result`)."""
