"""`identifiers` finds word by word exactly what the plain expression finds over a text.

The expression (`_IDENTIFIER`) is the definition; `identifiers` splits a text into
words, matches each distinct word once and only with the forms it can hold. These
tests hold it to the expression over every message of the shared dataset, over
seeded random texts made of the characters the forms turn on, and over hand-made
cases at the edges of the forms.
"""

from __future__ import annotations

import json
import random

import pytest

from app.context.references import _IDENTIFIER, SCAN_CHARS, identifiers
from tests.support.context_builders import load_sessions


def expression(text: str) -> frozenset[str]:
    """Every match of the expression over the text, as `identifiers` defines them."""
    values = (
        m.group(0).rstrip(".-@") for m in _IDENTIFIER.finditer(text, 0, min(len(text), SCAN_CHARS))
    )
    return frozenset(v for v in values if len(v) >= 3)


def said_text(message: dict[str, object]) -> str:
    """A message's text and its calls' arguments, as references.py reads them."""
    content = message.get("content")
    if isinstance(content, list):
        content = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    calls = message.get("tool_calls") or []
    assert isinstance(calls, list)
    args = [str(c.get("function", {}).get("arguments") or "") for c in calls]
    return "\n".join([str(content or ""), *args])


def test_every_message_of_the_dataset() -> None:
    texts = [said_text(m) for s in load_sessions() for m in s["messages"]]
    words: dict[str, tuple[str, ...]] = {}  # shared, as one view shares it
    differ = [t[:80] for t in texts if identifiers(t, words) != expression(t)]
    assert not differ
    assert sum(len(identifiers(t)) for t in texts) > 10_000  # the dataset is full of them


@pytest.mark.parametrize(
    "text",
    [
        "../../../../testbed/src/_pytest/skipping.py",
        "(./build/temp.linux-x86_64-3.6/sklearn), then ~/a/b and /etc/hosts.",
        "a/.. x/./y .hidden/file .. ./ ../",
        "x(.abc os.path.join( api.example.com. foo.bar.. __init__.py",
        "src/app/special_handler.py:12:4: E1101 'Refund' has no member 'amount_cents'",
        "getUserName HXDUBJ W2378156 a1b2c3d4 48213 1822 12 a.12345 12345.6 v1.2.3",
        "ÉtéCase Été abcDef٣ ٣٣٣ x٣٣٣ _private__name_ __dunder__ a-b_c d@e.f",
        "user@example.com:/srv/repo.git http://host.io/path?q=1&r=ABCDEFG#frag",
        "<returncode>0</returncode> {'key': 'value_one'} [item_two] \"quoted.name\"",
        "mixed\x1cseparator\x1dchars_here\u2028line\u3000ideo_space",
    ],
)
def test_edges_of_the_forms(text: str) -> None:
    assert identifiers(text) == expression(text)


def test_random_texts() -> None:
    """Texts of the characters the forms turn on, words stuck to punctuation."""
    rng = random.Random(37)
    alphabet = "aZ_./-@~19é٣,(:\"'\n xYQ.\tb_A0"
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert identifiers(text) == expression(text), json.dumps(text)


def test_past_the_scan_limit() -> None:
    """A word cut by the scan limit is matched as the expression matches it: cut."""
    text = "w " * ((SCAN_CHARS - 8) // 2) + " abc_defghij/klm.py"
    assert identifiers(text) == expression(text) == {"abc_def"}
