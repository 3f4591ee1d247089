"""The word lists of the text signals: one place, used by context scoring and compaction.

`app/context/scoring.py` scores history units and picks the key lines of a cut
with them (`str.find` with a word-boundary check, for speed); `app/compaction/
signals.py` tags sentences for memory-flush candidates, extractive summaries and
checks (regexes built from the same lists). Two lists per signal used to drift
apart; a word added here now counts in both.

No list here decides whether a user's message is kept: strategies keep the
user's words whatever they say (SPEC §3, §5); these only rank other content and
order what is folded first.

Latin phrases match whole words, case-insensitively; Chinese terms match
anywhere (Chinese has no spaces to check).
"""

from __future__ import annotations

# File extensions that make a word a file name (`app.py`, `config.yaml`): a path
# signal when scoring context, an identifier kept verbatim by compaction.
FILE_EXTENSIONS: tuple[str, ...] = (
    *("py", "pyi", "js", "ts", "tsx", "jsx", "json", "yaml", "yml", "toml", "md", "rst"),
    *("txt", "cfg", "ini", "sh", "go", "rs", "java", "kt", "c", "h", "cc", "cpp", "hpp"),
    *("cs", "rb", "php", "html", "css", "sql", "log", "csv", "lock", "xml", "proto", "tf"),
    "env",
)


def extensions_pattern() -> str:
    """FILE_EXTENSIONS as one regex group, longest first (so `tsx` wins over `ts`)."""
    return "(?:" + "|".join(sorted(FILE_EXTENSIONS, key=len, reverse=True)) + ")"


LATIN: dict[str, tuple[str, ...]] = {
    "constraint": (
        *("must", "mustn't", "never", "always", "should", "shouldn't", "need to", "needs to"),
        *("require", "required", "requires", "don't", "dont", "do not", "cannot", "can't"),
        *("avoid", "make sure", "only use"),
    ),
    "decision": (
        *("we decided", "decided to", "decided", "decision", "let's go with", "lets go with"),
        *("we'll use", "we will use", "going with", "agreed", "settled on", "chose"),
        *("choose to", "the plan is"),
    ),
    "preference": (
        *("prefer", "prefers", "preferred", "i'd rather", "i would rather", "i like"),
        *("i want", "i'd like", "please use", "favorite", "favourite"),
    ),
    "todo": (
        *("todo", "to-do", "fixme", "next step", "remember to", "follow-up", "follow up"),
        *("later we", "still need", "open question", "pending"),
    ),
}
CJK: dict[str, tuple[str, ...]] = {
    "constraint": (
        *("必须", "需要", "不要", "禁止", "不能", "务必", "一定", "不得", "千万", "只能"),
        "别再",
    ),
    "decision": ("决定", "就用", "选定", "确定用", "定了", "采用"),
    "preference": ("喜欢", "希望", "最好", "偏好", "想要", "倾向"),
    "todo": ("待办", "记得", "下一步", "之后再", "还需要", "稍后"),
}
