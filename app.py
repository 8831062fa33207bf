"""Serve the rag-bot chat (the same as `rag-bot serve`, with its one-line errors for bad settings)."""

import sys

from rag_bot.surfaces.cli import main

if __name__ == "__main__":
    sys.exit(main(["serve"]))
