"""What an author does with a lesson's recorded runs, beside making them: `course runs prune`."""
