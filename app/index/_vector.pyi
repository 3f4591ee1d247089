# app/index/_vector.c, built by setup.py where a C compiler is found.
from collections.abc import Callable

def grouped(
    data: bytes,
    spaces: bytes,
    split_token: Callable[[bytes], object],
    limit: int,
    max_position: int,
    cached_bytes: int,
    max_tokens: int,
) -> tuple[dict[bytes, bytes | bytearray], int, int] | None: ...
def binary(vector: dict[bytes, bytes | bytearray], max_position: int) -> bytes: ...
