"""String types for client input that reaches the database.

PostgreSQL text cannot hold NUL, and UTF-8 cannot encode lone surrogates;
left alone either would fail inside the driver as a 500. These types refuse
them at the edge with a 422 naming the field.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from app.jsonsafe import storable_problem


def _storable(value: str) -> str:
    problem = storable_problem(value, "")
    if problem is not None:
        raise ValueError(problem[1])
    return value


StoredStr = Annotated[str, AfterValidator(_storable)]
