"""Moved to app/conversation.py (the one module of message structure); this name is kept
so that code written against it still imports. New code imports app.conversation."""

from __future__ import annotations

from app.conversation import LoggedMessage as LoggedMessage
from app.conversation import Role as Role
from app.conversation import call_function as call_function
from app.conversation import content_text as content_text
from app.conversation import counts_in_context as counts_in_context
from app.conversation import is_summary_class as is_summary_class
