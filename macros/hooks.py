"""mkdocs hooks: navigation from the outline, one failure listing every page problem, the course's
two sides, and what a published site carries (course.pages.mkdocs_adapter)."""

from course.pages.mkdocs_adapter import (
    on_config,
    on_env,
    on_nav,
    on_page_content,
    on_page_context,
    on_page_markdown,
    on_post_build,
    on_post_page,
    on_pre_build,
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
