"""String types for client input that reaches the database (they live in app/jsonsafe.py,
below the domains; re-exported here, where they were first)."""

from __future__ import annotations

from app.jsonsafe import StoredStr as StoredStr
