"""The library's layers (MAINTAINING.md, "Architecture"): nothing imports from a layer below it."""

import ast
from pathlib import Path

LIB = Path(__file__).resolve().parent.parent / "course_lib"

LAYERS = [
    {"backend", "features", "dtypes"},
    {"gemm", "model", "instruments", "timing", "compiler", "model_shapes", "fp8"},
    {"registry", "kernels"},
    {"target", "correctness", "results", "bench", "profiles", "plots", "report", "notebooks", "viz", "learn", "jupyter", "exercises"},
]


def _layer(name: str) -> int:
    for i, names in enumerate(LAYERS):
        if name in names:
            return i
    raise AssertionError(f"course_lib.{name} is in no layer of MAINTAINING.md's architecture")


def _imports(path: Path) -> set[str]:
    """The course_lib modules (first component below course_lib) that ``path`` imports."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("course_lib"):
            parts = node.module.split(".")
            if len(parts) > 1:
                out.add(parts[1])
            else:
                out.update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[1] for a in node.names if a.name.startswith("course_lib."))
    return out


def test_no_module_imports_from_a_layer_below():
    wrong = []
    for path in sorted(LIB.rglob("*.py")):
        rel = path.relative_to(LIB)
        if rel.name == "__init__.py" and rel.parent == Path("."):
            continue  # the package itself re-exports the public functions
        own = rel.parts[0].removesuffix(".py")
        for imported in _imports(path):
            if _layer(imported) > _layer(own):
                wrong.append(f"{rel} imports course_lib.{imported}")
    assert not wrong, "\n".join(wrong)


def test_every_module_has_a_layer():
    for path in LIB.iterdir():
        if path.suffix == ".py" and path.name != "__init__.py" or (path.is_dir() and (path / "__init__.py").exists()):
            _layer(path.name.removesuffix(".py"))


def test_no_kernel_module_imports_the_registry():
    """The manifest (course_lib.registry) lists the kernel modules' wrappers; the kernel modules know
    nothing of it, so there is no import circle for a drawing of the imports to miss."""
    wrong = [str(p.relative_to(LIB)) for p in sorted((LIB / "kernels").rglob("*.py")) if "registry" in _imports(p)]
    assert not wrong, f"kernel modules importing course_lib.registry: {wrong}"


def test_kernels_hold_no_pictures_and_no_exercises():
    """MAINTAINING.md, "Where things go": every picture and widget is in viz/ (charts of results in
    plots), every exercise and its solutions in exercises/; kernels/ draws nothing and asks nothing."""
    drawing = {"matplotlib", "ipywidgets", "IPython"}
    wrong = []
    for path in sorted((LIB / "kernels").rglob("*.py")):
        rel = path.relative_to(LIB)
        if "exercise" in path.stem:
            wrong.append(f"{rel}: an exercise module inside kernels/")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            else:
                continue
            wrong += [f"{rel} imports {n}" for n in names if n.split(".")[0] in drawing]
    assert not wrong, "\n".join(wrong)
