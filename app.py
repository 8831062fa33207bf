"""Serve the rag-bot chat (the same as `rag-bot serve`)."""

from rag_bot.ui import serve

if __name__ == "__main__":
    serve()
