"""Every table in one metadata, so Alembic autogenerate and `alembic check` see them all."""

from app.db.models.api_key import ApiKeyRow
from app.db.models.base import Base
from app.db.models.job import CompactionJobRow, CompactionWorkerRow
from app.db.models.layout import ContextLayoutRow
from app.db.models.message import EventRow, MessageRow, ToolCallRow
from app.db.models.session import DEFAULT_TENANT, SessionRow

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
