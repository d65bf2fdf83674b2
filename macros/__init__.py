"""The mkdocs-macros module: the page macros live in `course.pages.macros`, the glue in
`course.pages.mkdocs_adapter`.
"""

from course.pages.mkdocs_adapter import define_env, on_post_page_macros, on_pre_page_macros

__all__ = ["define_env", "on_post_page_macros", "on_pre_page_macros"]
