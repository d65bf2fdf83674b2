"""After the HTML: the page PDF (WeasyPrint), the lesson zip and its START-HERE.md."""
