"""The mkdocs-macros module: the page macros live in `course.pages.macros`, the glue in
`course.pages.plugin`.
"""

from course.pages.plugin import define_env, on_post_page_macros, on_pre_page_macros

__all__ = ["define_env", "on_post_page_macros", "on_pre_page_macros"]
