"""Units of history for assembly: single messages and whole tool groups, with their turn.

The split itself lives in app/conversation.py (`split_groups`), with the rest of
the message structure; these names are what the strategies import.
"""

from __future__ import annotations

from app.conversation import Group as Group
from app.conversation import SetAside as SetAside
from app.conversation import UnitKind as UnitKind
from app.conversation import is_summary_message as is_summary_message
from app.conversation import split_groups as split_units

__all__ = ["Group", "SetAside", "UnitKind", "is_summary_message", "split_units"]
