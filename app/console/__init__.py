"""The read-only operator console served at /ui (issue 12)."""
