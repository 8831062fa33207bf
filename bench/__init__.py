"""rag-bot's benchmarks, run as modules from the repository root: `python -m bench.<fit|eval|perf>.<script>` (bench/README.md)."""
