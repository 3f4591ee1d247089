from __future__ import annotations

from datetime import datetime

from sqlalchemy import Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, created_at_column


class ApiKeyRow(Base):
    """An API key of one tenant. Only the SHA-256 of the key is stored.

    Keys are 256-bit random strings, so a fast hash is enough: there is no
    password to guess, and every request can afford the lookup.
    """

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(Text, index=True)
    key_hash: Mapped[str] = mapped_column(Text, unique=True)
    name: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = created_at_column()
    revoked_at: Mapped[datetime | None] = mapped_column()
