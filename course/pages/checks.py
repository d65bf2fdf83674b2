"""Knowledge checks and predict-then-measure checks: their declared schema and their HTML.

A page declares its checks under `checks:` in its data file (`<page>.yml` beside `<page>.md`) or
in its front matter, and places each with `{{ check("id") }}`:

    checks:
      grows:
        kind: predict                      # or knowledge (the default)
        question: How much slower is decoding at 4,096 tokens than at 128?
        measured: decode.tps_short / decode.tps_long   # shown only after the reader locks in
        decimals: 1
        suffix: " ×"
        options:
          - {text: "About the same", when: "decode.tps_short / decode.tps_long < 1.1", why: "..."}
          - {text: "Clearly slower", when: "decode.tps_short / decode.tps_long >= 1.1", why: "..."}

A check is one question: its options (2 to 10, lettered A to J) and exactly one right option,
marked `right: true`, or, in a predict check, the one whose `when` condition holds for the
recorded run. Several questions are several checks, each placed with its own `check("id")`; a
check given `questions:` is refused with that advice. The HTML works without JavaScript (the
answer sits in a collapsed <details>, which a PDF prints open); `docs/assets/course.js` turns it
into a widget.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Option(_Strict):
    """One answer a reader may pick."""

    text: str
    """The option as the reader sees it (Markdown; macros allowed)."""
    right: bool = False
    """Whether this is the right answer."""
    when: str | None = None
    """Predict checks: a condition over recorded values that makes this option the right one."""
    why: str = ""
    """Why it is right, why it is tempting, or why it is wrong (shown after answering)."""


LETTERS = "ABCDEFGHIJ"


class Check(_Strict):
    """A multiple-choice check: one question, its options, one right answer."""

    kind: Literal["knowledge", "predict"] = "knowledge"
    """`knowledge`: a question on the page's ideas; `predict`: guess before seeing a measurement."""
    question: str
    """The question (Markdown; macros allowed)."""
    options: list[Option] = Field(min_length=2, max_length=len(LETTERS))
    """The answers to pick from, in the order shown (2 to 10)."""
    measured: str | None = None
    """Predict checks: the value (an expression over `step.name`) revealed after answering."""
    unit: str | None = None
    """Unit to show `measured` in."""
    decimals: int | None = None
    """Decimals to show `measured` with."""
    percent: bool = False
    """Show `measured` as a percentage."""
    suffix: str = ""
    """Text after `measured`, such as ' ×'."""
    note: str = ""
    """A closing remark shown with the answer."""

    @model_validator(mode="before")
    @classmethod
    def _one_question(cls, data: Any) -> Any:
        if isinstance(data, dict) and (
            "questions" in data or isinstance(data.get("question"), list)
        ):
            raise ValueError(
                "a check holds one question: make each question a check of its own, under its "
                "own id in checks:, and place each with check('id') (several in a row make a quiz)"
            )
        return data

    @model_validator(mode="after")
    def _shape(self) -> Check:
        marked = sum(o.right for o in self.options)
        conditional = sum(o.when is not None for o in self.options)
        if self.kind == "knowledge" and conditional:
            raise ValueError(
                "'when' conditions belong to predict checks; mark the right option with 'right: "
                "true'"
            )
        if conditional and marked:
            raise ValueError(
                "mark the right option with 'right: true' or give every option a 'when', not both"
            )
        if conditional and conditional != len(self.options):
            raise ValueError("give every option a 'when' condition, or none")
        if not conditional and marked != 1:
            found = "none is" if marked == 0 else f"{marked} are"
            raise ValueError(f"exactly one option must be marked 'right: true' ({found})")
        if self.kind == "predict" and self.measured is None:
            raise ValueError("a predict check needs 'measured': the value revealed after answering")
        return self


@dataclass
class ShownOption:
    """An option ready for HTML: its text and explanation rendered, its rightness decided."""

    text: str
    why: str
    right: bool


@dataclass
class ShownCheck:
    """A check ready for HTML."""

    id: str
    kind: str
    question: str
    options: list[ShownOption]
    measured: str = ""
    """The measured value's HTML (predict checks)."""
    note: str = ""


LABEL = {"knowledge": "Check your understanding", "predict": "Predict, then measure"}
BUTTON = {"knowledge": "Check my answer", "predict": "Lock in my prediction"}


def check_html(check: ShownCheck) -> str:
    """The check as a form (for the widget) followed by its answer in a collapsed block."""
    cid = html.escape(check.id, quote=True)
    right = next(i for i, o in enumerate(check.options) if o.right)
    rows = []
    for i, option in enumerate(check.options):
        rows.append(
            f'<div class="course-check__option" data-option="{i}">'
            f'<input type="radio" id="check-{cid}-{i}" name="check-{cid}" value="{i}">'
            f'<label for="check-{cid}-{i}"><span class="course-check__letter">{LETTERS[i]}.</span> '
            f"{option.text}</label>"
            f'<div class="course-check__why" hidden><p><strong '
            'class="course-check__verdict"></strong> '
            f"{option.why}</p></div></div>"
        )
    measured = ""
    if check.measured:
        measured = (
            f'<p class="course-check__measured" hidden>What the lab measured: {check.measured}</p>'
        )
    form = (
        f'<form class="course-check__form" data-right="{right}" novalidate>'
        f'<fieldset><legend><span class="course-check__kind">{LABEL[check.kind]}.</span> '
        f"{check.question}</legend>{''.join(rows)}</fieldset>"
        f"{measured}"
        f'<div class="course-check__actions course-js-only">'
        f'<button type="submit" class="course-button '
        f'course-button--primary">{BUTTON[check.kind]}</button> '
        f'<button type="button" class="course-button course-check__again" hidden>Try '
        "again</button></div>"
        f'<p class="course-check__result course-js-only" role="status" aria-live="polite"></p>'
        f"</form>"
    )
    return (
        f'<div class="course-check" id="check-{cid}" data-check="{cid}" data-kind="{check.kind}">'
        f"{form}{answer_block(check, right)}</div>"
    )


def answer_block(check: ShownCheck, right: int) -> str:
    """The static answer: right option, measured value and every explanation (shown in a PDF)."""
    items = []
    for i, option in enumerate(check.options):
        verdict = "Right" if option.right else "Not right"
        why = f" {option.why}" if option.why else ""
        items.append(f"<li><strong>{LETTERS[i]}. {verdict}.</strong>{why}</li>")
    measured = f"<p>What the lab measured: {check.measured}</p>" if check.measured else ""
    note = f"<p>{check.note}</p>" if check.note else ""
    return (
        f'<details class="course-check__answer"><summary>Answer</summary>'
        f"<p>The answer is <strong>{LETTERS[right]}</strong>: {check.options[right].text}</p>"
        f"{measured}<ul>{''.join(items)}</ul>{note}</details>"
    )


def position_warning(checks: dict[str, Check]) -> str | None:
    """A warning when every knowledge check has its right answer at the same position (a reader
    who always picks that letter passes them all), or when the right option is always the longest.
    """
    knowledge = [c for c in checks.values() if c.kind == "knowledge"]
    if len(knowledge) < 2:
        return None
    places = {next(i for i, o in enumerate(c.options) if o.right) for c in knowledge}
    if len(places) == 1:
        letter = LETTERS[places.pop()]
        return f"every knowledge check has its right answer at {letter}: spread them"
    longest = [
        max(range(len(c.options)), key=lambda i: len(c.options[i].text))
        == next(i for i, o in enumerate(c.options) if o.right)
        for c in knowledge
    ]
    if all(longest):
        return "in every knowledge check the right answer is the longest option: vary the lengths"
    return None
