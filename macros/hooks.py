"""mkdocs hooks: navigation from the lesson registry, and one failure listing every page problem."""

from course.pages.plugin import on_config, on_env, on_pre_build

__all__ = ["on_config", "on_env", "on_pre_build"]
