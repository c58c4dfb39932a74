"""Every kernel the course teaches, with its wrapper: one module (or package) per notebook, named
like it; the course manifest (course_lib.registry) lists the stages they make."""
