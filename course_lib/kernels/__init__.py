"""Every kernel the course teaches: one module per stage, named like its notebook."""
