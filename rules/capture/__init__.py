"""Rules of this layer: one module per rule."""
