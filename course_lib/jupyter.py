"""What the course's JupyterLab server does differently (``make lab`` installs it as the default).

A notebook opened in JupyterLab is marked modified as soon as its kernel starts if its
``language_info`` metadata is not exactly what the kernel reports - and the kernel reports its
Python version, which is the learner's (3.11, 3.12 or 3.13), not the one the notebook was run with.
Closing it untouched then asks to save. The committed notebooks therefore carry no
``language_info`` (``course_lib.notebooks`` strips it), and this contents manager fills in, as it
serves a notebook, what the environment's own kernel will report, so the two agree and an untouched
notebook stays unmodified.
"""

from __future__ import annotations

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager


def kernel_language_info() -> dict:
    """What the environment's ipykernel reports as ``language_info`` (its Python is the server's)."""
    from ipykernel.ipkernel import IPythonKernel

    return dict(IPythonKernel.language_info)


class CourseContentsManager(AsyncLargeFileManager):
    """Jupyter server's default contents manager, plus ``language_info`` filled in on the way out."""

    async def get(self, path, content=True, type=None, format=None, **kwargs):  # noqa: A002 - jupyter_server's names
        model = await super().get(path, content=content, type=type, format=format, **kwargs)
        if content and model.get("type") == "notebook" and model.get("content") is not None:
            metadata = model["content"].setdefault("metadata", {})
            if "language_info" not in metadata:
                metadata["language_info"] = kernel_language_info()
        return model
