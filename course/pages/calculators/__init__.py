"""Calculators that start from measurements: a form seeded from the page's run, its chart's
recorded points, and the worked rows a PDF prints (the macro is in `widget.py`)."""
