"""Worker of :mod:`course_lib.instruments.numba_cuda_front`, run as a script in a Python without
numba's CUDA simulator: reads {"source", "kernel", "args"} as JSON on stdin, runs numba-cuda's
compiler on the kernel up to LLVM IR (for compute capability 7.5; no GPU, no NVVM needed), and
prints one JSON line: {"refused": "<numba's message>"}, {"refused": null}, or {"unknown": "<why>"}
when the machinery itself failed."""

import json
import sys


def main() -> int:
    request = json.loads(sys.stdin.read())
    try:
        from numba.core import errors, types
        from numba.cuda import dispatcher
        from numba.cuda.compiler import compile_cuda

        class NoDevice:  # a device function's compile asks the current device for its capability
            compute_capability = (7, 5)

        dispatcher.get_current_device = NoDevice

        scope: dict = {}
        exec(compile(request["source"], "<learner's kernel>", "exec"), scope)  # noqa: S102 - the learner's own source
        argtypes = tuple(types.Array(getattr(types, a[1]), a[2], a[3]) if a[0] == "array" else getattr(types, a[1])
                         for a in request["args"])
        fn = scope[request["kernel"]]
    except Exception as e:  # noqa: BLE001
        print(json.dumps({"unknown": f"{type(e).__name__}: {e}"}))
        return 0
    try:
        compile_cuda(fn, types.void, argtypes, cc=(7, 5))
    except (errors.NumbaError, NotImplementedError) as e:
        print(json.dumps({"refused": str(e)}))
        return 0
    except Exception as e:  # noqa: BLE001 - not numba's verdict on the kernel
        print(json.dumps({"unknown": f"{type(e).__name__}: {e}"}))
        return 0
    print(json.dumps({"refused": None}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
