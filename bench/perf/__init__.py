"""Performance: speed, memory, disk and scale."""
