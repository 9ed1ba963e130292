"""Compiling checked policies into constraint sets and manifests, written only where compile owns files."""
