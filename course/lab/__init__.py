"""The recipe: the lab.yml schema, its loading with precise errors, and a lab folder's files."""
