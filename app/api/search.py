from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from app.api.deps import BeforeSeq, DatabaseDep, SessionId, TenantDep
from app.api.models.search import SearchOut
from app.api.openapi import answers
from app.core.limits import SEARCH_LIMIT_MAX
from app.search import service

router = APIRouter(tags=["search"])


@router.get(
    "/sessions/{session_id}/search",
    summary="Recall: full-text search over the whole log",
    responses=answers({200: (SearchOut, "ranked hits with snippets and message paths")}),
)
async def search(
    session_id: SessionId,
    db: DatabaseDep,
    tenant: TenantDep,
    q: Annotated[str | None, Query(description="words, identifiers, any language")] = None,
    limit: Annotated[int, Query(ge=1, le=SEARCH_LIMIT_MAX)] = 10,
    before_seq: BeforeSeq = None,
    roles: Annotated[
        list[str] | None,
        Query(description="only these roles: `roles=user,tool` or `roles=user&roles=tool`"),
    ] = None,
) -> dict[str, Any]:
    """Every message of the session is searched: compacted ones, ones a payload left
    out, tool outputs, tool-call names and arguments. Words match whole, and a word
    in few messages also as a prefix from three characters on; an identifier
    (`src/app/models.py`, `snake_case_name`, `getUserName`) whole or, when no
    message holds it whole, by a run of its parts (`app/models.py`, `case_name`);
    Chinese, Japanese and Korean text by any substring of two or more characters,
    a longer run pair by pair (a question naming something finds it). Messages
    matching the query's rarest terms rank first, newest first among equals; the
    recall tool's own calls and answers, which quote earlier hits, come last. A
    query of only punctuation finds nothing; an empty one is a 422. Read a hit in
    full at its `path`."""
    found = await service.search(
        db,
        tenant,
        session_id,
        service.check_query(q),
        limit=limit,
        before_seq=before_seq,
        roles=service.check_roles(roles),
    )
    return found.as_dict(session_id, q or "")
