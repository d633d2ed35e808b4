"""The ratchet: a committed baseline and the two-way comparison against it."""
