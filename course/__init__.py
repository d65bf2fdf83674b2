"""The course: labs run and recorded, pages built from the records, lessons packaged."""

from __future__ import annotations

__version__ = "0.1.0"
