"""Executing a lab: the plan (what runs, what is reused), the step kinds, processes and their
groups,
terminal transcripts, captures, host facts, engine overlays and the live display."""
