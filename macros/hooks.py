"""mkdocs hooks: navigation from the outline, one failure listing every page problem, the course's
two sides, and what a published site carries (course.pages.publishing)."""

from course.pages.plugin import on_config, on_env, on_page_content, on_pre_build
from course.pages.publishing import (
    on_nav,
    on_page_context,
    on_page_markdown,
    on_post_build,
    on_post_page,
)

__all__ = [
    "on_config",
    "on_env",
    "on_nav",
    "on_page_content",
    "on_page_context",
    "on_page_markdown",
    "on_post_build",
    "on_post_page",
    "on_pre_build",
]
