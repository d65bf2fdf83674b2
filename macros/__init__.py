"""The mkdocs-macros module: the page macros live in `course.pages`, the glue in `course.plugin`."""

from course.plugin import define_env, on_post_page_macros

__all__ = ["define_env", "on_post_page_macros"]
