"""Pure indicator math: arrays in, numbers out. No pytest, no model loading."""
