"""Errors a user sees as one clear line (kept free of heavy imports so the CLI can fail fast)."""


class StoreError(RuntimeError):
    """The store cannot be opened or used."""


class NoIndexError(RuntimeError):
    """The store holds no papers yet."""


class QuestionError(ValueError):
    """The question cannot be asked as given; the message says why (rag_bot.question.checked_question)."""


class EmptyQuestionError(QuestionError):
    """The question is empty or blank."""


class QuestionTooLongError(QuestionError):
    """The question is over the one length limit every surface shares (rag_bot.question.MAX_QUESTION_CHARS)."""


class WriterUnavailable(RuntimeError):
    """A writer (or the model the relevance judge asks) could not answer; the message is the one-line reason shown
    to the user."""
