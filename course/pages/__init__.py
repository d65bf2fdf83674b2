"""What the macros do: one page context, the macros as a registry, number formatting, checks,
claims, widgets, page facts, FAQ and glossary, the lesson registry, and the run a page shows."""
