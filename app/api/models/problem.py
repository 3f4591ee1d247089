"""The problem+json shape (RFC 9457 with contextd's stable `code`), declared once for the
OpenAPI description: every error any route or lane answers is rendered by
`app.core.errors.problem`, and documented as this model (`app/api/openapi.py`
`ERROR_RESPONSES`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ProblemItem(BaseModel):
    loc: str
    msg: str


class Problem(BaseModel):
    """RFC 9457 problem details with contextd's stable `code`."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "type": "https://contextd.dev/problems/validation_error",
                    "title": "Validation failed",
                    "status": 422,
                    "detail": "messages[0].role: must be one of system, user, assistant, tool",
                    "code": "validation_error",
                    "errors": [
                        {
                            "loc": "messages[0].role",
                            "msg": "must be one of system, user, assistant, tool",
                        }
                    ],
                }
            ]
        },
    )

    type: str
    title: str
    status: int
    detail: str
    code: str
    errors: list[ProblemItem] | None = None
