"""The macro `calculator("kv-cache")`: a form the page's script computes with, seeded from the
page's run, and the worked rows a PDF prints.

    <div class="course-calc">
      <div class="course-calc__slot">  the title and a button; the form comes in its place from
                                       calculator-kv-cache.html beside the page:
      <form data-calculator="kv-cache">
        fieldsets of <input name="num_hidden_layers" ...> (config.json's and the facts' names),
        a "paste your config.json" field, a card chooser from the facts, the results in
        <output name="...">, a chart, a line stating the gap between formula and measurement,
        a field for the JSON compare.py writes; the numbers in its data-numbers attribute
      </form>
      <table class="course-calc__rows">  the worked rows, every number a recorded value
    </div>

The form costs nothing before it is used: docs/assets/course.js fetches it and calculator.js when
the slot comes near the screen or its button is pressed. Without JavaScript, and in the PDF
(WeasyPrint runs none), only the table is shown.
"""

from __future__ import annotations

import html
import json
from typing import Any

from ..context import PageContext
from ..macros import RAW, _part, macro
from .data import CalculatorError, CardData, Numbers, in_unit, numbers
from .lessons import CALCULATORS
from .spec import GROUPS, Calculator, Cell, Grid, Input, Output, Table

SCRIPT_VERSION = 1
"""What the data says to the script; the script refuses data of another version."""


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _shown(value: float, field: Input) -> str:
    """An input's value as the field holds it: in its unit, with its decimals, no separators."""
    number = in_unit(value, field.unit)
    if field.decimals is None:
        return f"{round(number):d}"
    return f"{number:.{field.decimals}f}"


def _field(calc: Calculator, field: Input, value: float | str) -> str:
    fid = f"calc-{calc.name}-{field.name}"
    unit = f" ({_esc(field.unit)})" if field.unit else ""
    code = f" <code>{_esc(field.name)}</code>"
    label = f'<label for="{fid}">{_esc(field.label)}{unit}{code}</label>'
    if field.choices:
        options = "".join(
            f'<option value="{_esc(key)}"{" selected" if key == value else ""}>'
            f"{_esc(text)}</option>"
            for key, text in field.choices
        )
        return (
            f'<div class="course-calc__field">{label}<select id="{fid}" name="{field.name}" '
            f'data-seed="{_esc(str(value))}">{options}</select></div>'
        )
    assert not isinstance(value, str), field.name  # a number's seed (data.seed)
    if field.checkbox:
        checked = " checked" if value else ""
        return (
            f'<div class="course-calc__field course-calc__field--check">'
            f'<input type="checkbox" id="{fid}" name="{field.name}" value="1"{checked} '
            f'data-seed="{1 if value else 0}">{label}</div>'
        )
    shown = _shown(value, field)
    mode = "numeric" if field.step == "1" else "decimal"
    return (
        f'<div class="course-calc__field">{label}'
        f'<input type="number" id="{fid}" name="{field.name}" value="{shown}" '
        f'inputmode="{mode}" min="{field.minimum}" step="{field.step}" required '
        f'data-unit="{_esc(field.unit)}" data-decimals="{field.decimals or 0}" '
        f'data-exact="{value!r}" data-seed="{shown}"></div>'
    )


def _card_field(calc: Calculator, offered: list[CardData], chosen: str) -> str:
    fid = f"calc-{calc.name}-card"
    options = "".join(
        f'<option value="{_esc(c.key)}"{" selected" if c.key == chosen else ""}>'
        f"{_esc(c.label)}</option>"
        for c in offered
    )
    options += '<option value="own">Your own figures (type them below)</option>'
    return (
        f'<div class="course-calc__field course-calc__field--wide">'
        f'<label for="{fid}">Card <code>card</code></label>'
        f'<select id="{fid}" name="card">{options}</select></div>'
    )


def _paste(calc: Calculator) -> str:
    fid = f"calc-{calc.name}-config"
    return (
        f'<div class="course-calc__field course-calc__field--wide">'
        f'<label for="{fid}">Paste your config.json</label>'
        f'<textarea id="{fid}" name="config_json" rows="3" spellcheck="false" '
        f'autocomplete="off" aria-describedby="{fid}-status"></textarea>'
        f'<button type="button" class="course-button" data-action="read-config">'
        f"Read config.json</button>"
        f'<p class="course-calc__status" id="{fid}-status" role="status"></p></div>'
    )


def _fieldsets(calc: Calculator, n: Numbers) -> str:
    out = []
    for group, legend in GROUPS.items():
        fields = [f for f in calc.inputs if f.group == group]
        parts = [_field(calc, f, n.seeds[f.name]) for f in fields]
        if group == "model":
            parts.insert(0, _paste(calc))
        elif group == "card":
            parts.insert(0, _card_field(calc, n.cards, n.card))
        elif not parts:
            continue
        out.append(
            f'<fieldset class="course-calc__group course-calc__group--{group}">'
            f"<legend>{_esc(legend)}</legend>{''.join(parts)}</fieldset>"
        )
    return "".join(out)


def _output(calc: Calculator, out: Output, name: str) -> str:
    return (
        f'<output name="{name}" id="calc-{calc.name}-out-{name}" data-unit="{_esc(out.unit)}" '
        f'aria-live="off">–</output>'
    )


def _outputs(calc: Calculator) -> str:
    rows = "".join(
        f"<div><dt>{_esc(o.label)}</dt><dd>{_output(calc, o, o.name)}</dd></div>"
        for o in calc.outputs
    )
    listed = f'<dl class="course-calc__outputs">{rows}</dl>' if rows else ""
    return listed + (_grid(calc, calc.grid) if calc.grid else "")


def _grid(calc: Calculator, grid: Grid) -> str:
    head = "".join(
        f'<th scope="col">{_esc(c.label)}{f" ({_esc(c.unit)})" if c.unit else ""}</th>'
        for c in grid.columns
    )
    body = "".join(
        f'<tr><th scope="row">{_esc(label)}</th>'
        + "".join(f"<td>{_output(calc, c, f'{c.name}_{key}')}</td>" for c in grid.columns)
        + "</tr>"
        for key, label in grid.rows
    )
    return (
        f'<div class="course-calc__scroll" tabindex="0" role="region" '
        f'aria-label="{_esc(grid.caption)}"><table class="course-calc__grid">'
        f'<caption>{_esc(grid.caption)}</caption><thead><tr><th scope="col">'
        f"</th>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    )


def _chart(calc: Calculator) -> str:
    cid = f"calc-{calc.name}-chart"
    return (
        f'<figure class="course-calc__chart" aria-labelledby="{cid}-caption">'
        f'<div class="course-calc__plot" data-chart></div>'
        f'<figcaption id="{cid}-caption">{_esc(calc.chart)}.</figcaption></figure>'
        f'<p class="course-calc__gap" data-gap role="status"></p>' + _chart2(calc)
    )


def _chart2(calc: Calculator) -> str:
    if not calc.chart2:
        return ""
    cid = f"calc-{calc.name}-chart2"
    return (
        f'<figure class="course-calc__chart" aria-labelledby="{cid}-caption">'
        f'<div class="course-calc__plot" data-chart2></div>'
        f'<figcaption id="{cid}-caption">{_esc(calc.chart2)}.</figcaption></figure>'
        f'<p class="course-calc__gap" data-gap2 role="status"></p>'
    )


def _mine(calc: Calculator) -> str:
    fid = f"calc-{calc.name}-mine"
    return (
        f'<fieldset class="course-calc__group course-calc__group--mine">'
        f"<legend>Your own run</legend>"
        f'<p class="course-calc__hint" id="{fid}-hint">After the lab, '
        f"<code>python3 compare.py --json mine.json</code> in the lab folder writes your values "
        f"beside ours, ours scaled to your card; give that file here to plot them.</p>"
        f'<div class="course-calc__field course-calc__field--wide">'
        f'<label for="{fid}-file">The file compare.py wrote</label>'
        f'<input type="file" id="{fid}-file" name="compare_file" accept=".json,application/json" '
        f'aria-describedby="{fid}-hint"></div>'
        f'<div class="course-calc__field course-calc__field--wide">'
        f'<label for="{fid}-text">Or paste it</label>'
        f'<textarea id="{fid}-text" name="compare_json" rows="2" spellcheck="false" '
        f'autocomplete="off"></textarea>'
        f'<button type="button" class="course-button" data-action="read-compare">Plot my run'
        f"</button></div>"
        f'<p class="course-calc__status" data-mine role="status"></p></fieldset>'
    )


def _data(ctx: PageContext, calc: Calculator, n: Numbers) -> str:
    """The numbers the page's script computes with, as the form's data-numbers attribute."""
    data: dict[str, Any] = {
        "version": SCRIPT_VERSION,
        "calculator": calc.name,
        "lesson": ctx.lesson,
        "run": ctx.run.run_id,
        "gpu": ctx.run.record.host.gpu.name if ctx.run.record.host.gpu else None,
        "model": n.model,
        "model_type": n.model_type,
        "seeds": n.seeds,
        "card": n.card,
        "cards": [c.as_json() for c in n.cards],
        "points": n.points,
        "values": n.values,
    }
    # an attribute, not a <script type="application/json">: Material's instant navigation runs
    # the scripts of the page it brings in, whatever their type
    return _esc(json.dumps(data, sort_keys=True, separators=(",", ":")))


def _cell(ctx: PageContext, cell: Cell) -> str:
    if cell.expr is None:
        return _esc(cell.text)
    shown: str = RAW["value"](
        ctx, cell.expr, unit=cell.unit, decimals=cell.decimals, percent=cell.percent
    )
    if cell.signed and ctx.evaluate(cell.expr).value > 0:
        shown = "+" + shown
    return shown


def _caption(table: Table, seeds: dict[str, float | str]) -> str:
    """The worked rows' caption, a choice's seed put in where it names one (`{release}`): the
    release of the engine the page's run used, the one the rows' numbers follow."""
    chosen = {name: value for name, value in seeds.items() if isinstance(value, str)}
    try:
        return table.caption.format_map(chosen)
    except (KeyError, IndexError, ValueError) as exc:
        raise CalculatorError(
            f"worked rows' caption {table.caption!r}: {exc!r} names no field of choices"
        ) from None


def table_html(ctx: PageContext, table: Table, seeds: dict[str, float | str]) -> str:
    """The worked rows as a table; each number a recorded value, as value() shows it."""
    head = "".join(f'<th scope="col">{_esc(c)}</th>' for c in table.columns)
    caption = _caption(table, seeds)
    rows = []
    for number, row in enumerate(table.rows, 1):
        cells = [_part(f"worked row {number}", _cell, ctx, cell) for cell in row]
        first, rest = cells[0], cells[1:]
        rows.append(
            f'<tr><th scope="row">{first}</th>' + "".join(f"<td>{c}</td>" for c in rest) + "</tr>"
        )
    return (
        # hidden on screen, where the form sits above; the PDF, which has no form, says where it is
        '<p class="course-calc__print-note" hidden>The calculator itself, for your own model and '
        "card, is on the lesson's web page; here are its worked rows.</p>"
        f'<div class="course-calc__scroll" tabindex="0" role="region" '
        f'aria-label="{_esc(caption)}"><table class="course-calc__rows">'
        f"<caption>{_esc(caption)}</caption><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def form_file(name: str) -> str:
    """The file, beside the page, that holds a calculator's form."""
    return f"calculator-{name}.html"


def _slot(calc: Calculator) -> str:
    """What the page holds in the form's place: its title and a button that brings it (it also
    comes when the slot nears the screen)."""
    return (
        f'<div class="course-calc__slot course-js-only course-no-print" '
        f'data-calculator-src="{form_file(calc.name)}" data-calculator-for="{calc.name}">'
        f'<p class="course-calc__title">{_esc(calc.title)}</p>'
        f'<p><button type="button" class="course-button" data-action="open-calculator">'
        f"Open the calculator</button></p></div>"
    )


@macro
def calculator(ctx: PageContext, name: str) -> str:
    """A calculator of the page's lesson, seeded from its run, with its worked rows. The form
    goes to a file beside the page (`calculator-<name>.html`), fetched with its script when the
    page's slot for it nears the screen: a page pays for neither until a reader comes to it."""
    calc = CALCULATORS.get(name)
    if calc is None:
        raise CalculatorError(
            f"no calculator '{name}' (calculators: {', '.join(sorted(CALCULATORS))})"
        )
    n = numbers(ctx, calc)
    rows = table_html(ctx, calc.table, n.seeds) if calc.table else ""
    form = (
        f'<form class="course-calc__form" data-calculator="{calc.name}" '
        f'aria-labelledby="calc-{calc.name}-title" novalidate '
        f'data-numbers="{_data(ctx, calc, n)}">'
        f'<p class="course-calc__title" id="calc-{calc.name}-title">{_esc(calc.title)}</p>'
        f"{_fieldsets(calc, n)}"
        f'<div class="course-calc__results"><p class="course-calc__subtitle">Results</p>'
        f"{_outputs(calc)}{_chart(calc)}</div>"
        f"{_mine(calc)}"
        f'<p class="course-calc__actions"><button type="button" class="course-button" '
        f'data-action="reset">Back to the recorded run</button></p></form>\n'
    )
    if ctx.site_dir is not None:  # building the site, not only checking it
        target = ctx.site_dir / ctx.url / form_file(calc.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(form, encoding="utf-8")
    return f'<div class="course-calc" id="calc-{calc.name}">{_slot(calc)}{rows}</div>'
