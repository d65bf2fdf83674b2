"""The page checks `course check` and the build run over the text of every lesson page: typed
copies of recorded values and facts, a unit printed twice, one value twice in a sentence, a
"how many fit" count without its engine rule, words about the tooling, Sources without an address
(docs/writing-a-lesson.md, "Checks of the text"; settings in docs/data/lint.yml).

    check_page(root, entry, settings)   one page: its macros' problems and the findings
    known_source(func)                  another source of quantities a typed number may copy
"""

from __future__ import annotations

from .findings import Finding
from .numbers import Known, known_source
from .page import CheckedPage, check_page
from .settings import Settings, load_settings

__all__ = [
    "CheckedPage",
    "Finding",
    "Known",
    "Settings",
    "check_page",
    "known_source",
    "load_settings",
]
