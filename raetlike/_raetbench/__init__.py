"""Scripts that run RAET 0.6.8 itself as a benchmark peer (in a subprocess only)."""
