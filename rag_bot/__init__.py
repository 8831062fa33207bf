"""rag-bot: cited answers about a collection of research-paper abstracts, offline first."""

__version__ = "0.1.0"
