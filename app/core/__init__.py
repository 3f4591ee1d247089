"""The pure foundations every domain stands on: the conversation's structure, budgets,
tokens, limits, words, content parts, errors, settings, what JSONB can hold, the bill's
arithmetic. Nothing here reads a database or knows HTTP."""
