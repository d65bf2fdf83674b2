"""START-HERE.md numbers a lab's steps as its page numbers its hands-on steps."""

from __future__ import annotations

from course.pages.numbering import shown_steps, step_labels

PAGE = """
## Hands-on

### Step 1: on paper

{{ terminal("size") }}

### Step 2: the same with llama.cpp

{{ terminal("build-llama") }}
{{ terminal('gguf') }}
{{ terminal("server", lines="165-166") }}

## Questions people ask

{{ terminal("size") }}
"""


def test_steps_a_page_shows_take_its_numbers_and_the_others_follow_the_step_before() -> None:
    assert shown_steps(PAGE) == {"size": 1, "build-llama": 2, "gguf": 2, "server": 2}
    steps = ["size", "gguf", "gguf-8b", "server", "chat", "server-stop"]
    assert step_labels(PAGE, steps) == {
        "size": "1",
        "gguf": "2a",
        "gguf-8b": "2b",
        "server": "2c",
        "chat": "2d",
        "server-stop": "2e",
    }


def test_a_step_before_the_first_one_shown_goes_with_it() -> None:
    assert step_labels(PAGE, ["setup", "size", "gguf"]) == {
        "setup": "1a",
        "size": "1b",
        "gguf": "2",
    }


def test_a_page_without_step_headings_numbers_the_recipe_in_order() -> None:
    assert step_labels("{{ terminal('a') }}", ["a", "b"]) == {"a": "1", "b": "2"}
    assert step_labels(None, ["a", "b", "c"]) == {"a": "1", "b": "2", "c": "3"}
    many = [f"s{i}" for i in range(30)]
    text = "### Step 4: all\n" + "".join(f'{{{{ terminal("{s}") }}}}\n' for s in many)
    labels = step_labels(text, many)
    assert labels["s0"] == "4a" and labels["s25"] == "4z" and labels["s26"] == "4aa"
