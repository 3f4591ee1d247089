"""The pydantic models of the HTTP API's bodies and answers, for its OpenAPI description."""
