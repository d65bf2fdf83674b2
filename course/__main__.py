"""`python -m course`: the same as the `course` command."""

from .cli import main

main()
