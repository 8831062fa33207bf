"""Errors a user sees as one clear line (kept free of heavy imports so the CLI can fail fast)."""


class StoreError(RuntimeError):
    """The store cannot be opened or used."""


class NoIndexError(RuntimeError):
    """The store holds no papers yet."""


class EmptyQuestionError(ValueError):
    """The question is empty or blank."""
