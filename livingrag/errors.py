"""The project's exception tree. Driver errors are wrapped once, at the repository border."""

from __future__ import annotations


class LivingRAGError(Exception):
    """Base of every error this package raises on purpose."""


class ConfigError(LivingRAGError):
    """A setting is missing or invalid; the message names it."""


class DatabaseError(LivingRAGError):
    """The database could not be reached or refused an operation."""


class DatabaseUnavailable(DatabaseError):
    """The database server is down or unreachable (transient: retry later)."""


class ServerUnreachable(DatabaseUnavailable):
    """No connection to the server could be made, or the one in use was lost (as opposed to a
    statement that failed on a live connection, such as a timeout)."""


class StandbyLost(DatabaseUnavailable):
    """A read standby (``db.read_urls``) failed while a read ran on it; it is skipped from now on
    until it answers again, so the read can be sent once more (to another standby or the primary)."""


class SchemaOutOfDate(DatabaseError):
    """The database schema is older (or newer) than this code expects."""


class NotFound(LivingRAGError):
    """A named object (tenant, corpus, passage, experience) does not exist for this tenant."""


class AlreadyExists(LivingRAGError):
    """An object with that name already exists."""


class Conflict(LivingRAGError):
    """The operation would leave an object in a state that is not allowed (the message says why)."""


class QuotaExceeded(Conflict):
    """A tenant's quota (a setting such as ``api.max_corpora_per_tenant``) would be exceeded; the
    message names the quota and its value, and nothing was written."""

    def __init__(self, quota: str, limit: int, message: str) -> None:
        super().__init__(message)
        self.quota = quota
        self.limit = limit


class InvalidInput(LivingRAGError):
    """User input is malformed; the message names what was wrong and where."""


class AuthenticationError(LivingRAGError):
    """An API key is missing or unknown."""


class ModelUnavailable(LivingRAGError):
    """A model could not be loaded (not installed, no weights at that path)."""


class LLMError(LivingRAGError):
    """The language model call failed."""


class LLMUnavailable(LLMError):
    """The LLM server could not be reached or kept failing after retries."""


class LLMTimeout(LLMError):
    """The LLM did not answer within the configured timeout."""
