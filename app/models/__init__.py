"""Every table in one metadata, so Alembic autogenerate and `alembic check` see them all."""

from app.models.api_key import ApiKeyRow
from app.models.base import Base
from app.models.job import CompactionJobRow, CompactionWorkerRow
from app.models.layout import ContextLayoutRow
from app.models.message import EventRow, MessageRow, ToolCallRow
from app.models.session import DEFAULT_TENANT, SessionRow

__all__ = [
    "DEFAULT_TENANT",
    "ApiKeyRow",
    "Base",
    "CompactionJobRow",
    "CompactionWorkerRow",
    "ContextLayoutRow",
    "EventRow",
    "MessageRow",
    "SessionRow",
    "ToolCallRow",
]
