"""Starting a lesson: `course new LESSON` writes a lab, a page, its data file and a figure from the
templates under `templates/`, ready for `course run LESSON && course build`."""
