"""The hardware model: device profiles, occupancy and budget arithmetic, architecture features."""
