"""Can the course be installed here? Run by `make lab` / `make test` before anything is installed.

    python3 tools/check_platform.py [--gpu]                       # this machine
    python3 tools/check_platform.py --system Darwin --machine arm64  # what another platform would get

Exit status 1 with one message naming the supported route where the install cannot work (so `make`
stops at once, never deep inside pip's resolver); 0 otherwise, with a note for what works only in
part. Written for any Python 3 so that even an interpreter too old for the course gets the message.
"""

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys

# The Python versions whose resolution of requirements-lock.txt on PyPI a test checks (tools/lock.py).
SUPPORTED_PYTHONS = ((3, 11), (3, 12), (3, 13))
MACHINES = ("x86_64", "amd64", "aarch64", "arm64")
# PyPI's torch 2.13.0 for Linux is built with CUDA 13.0, which needs an NVIDIA driver of the 580
# series or newer (CUDA 13.0 release notes, "CUDA Driver" table); CUDA 13 also dropped GPUs older
# than compute capability 7.5 (Turing).
MIN_DRIVER = 580
MIN_CAPABILITY = (7, 5)

REMOTE = ("or run the course on a Linux machine with an NVIDIA GPU and open it from here "
          "(README: 'On a remote GPU machine')")


def problems(system, machine, python, has_ensurepip=True, wsl=False):
    """(fatal, notes): why the install cannot work here (empty if it can), and what to know."""
    fatal, notes = [], []
    machine = machine.lower()
    if system == "Darwin":
        fatal.append(
            "macOS cannot run this install: Triton publishes no macOS wheels and macOS has no CUDA. "
            "Use a Linux virtual machine or container on this Mac (CPU path: every notebook runs, "
            "with the H200's recorded speeds), " + REMOTE + ".")
    elif system == "Windows" or system.startswith(("CYGWIN", "MSYS", "MINGW")):
        fatal.append(
            "Native Windows cannot run this install (Triton publishes no Windows wheels; numba's CUDA "
            "simulator and the Makefile expect Linux). Use WSL2: `wsl --install -d Ubuntu`, then run "
            "`make lab` inside it (an NVIDIA GPU is visible there with the Windows driver alone), "
            + REMOTE + ".")
    elif system != "Linux":
        fatal.append(f"{system} is not supported: the course installs on Linux (x86_64), or on Windows "
                     "through WSL2.")
    if not fatal and machine not in MACHINES:
        fatal.append(f"This processor ({machine}) has no wheels of torch and Triton on PyPI; the course "
                     "installs on Linux x86_64 (aarch64 resolves too).")
    elif not fatal and machine in ("aarch64", "arm64"):
        notes.append("Linux on aarch64: the lock resolves on PyPI for it, but the course is tested on x86_64 only.")
    if python[:2] < SUPPORTED_PYTHONS[0]:
        fatal.append(
            "Python {}.{} is too old: the course needs Python 3.11, 3.12 or 3.13. Install one (from your "
            "distribution, deadsnakes, pyenv or uv) and run e.g. `make lab PYTHON=python3.12`.".format(*python[:2]))
    elif python[:2] > SUPPORTED_PYTHONS[-1]:
        notes.append("Python {}.{} is newer than the versions the course is checked on (3.11-3.13); "
                     "if the install fails, use e.g. `make lab PYTHON=python3.12`.".format(*python[:2]))
    if not has_ensurepip and not fatal:
        v = "{}.{}".format(*python[:2])
        fatal.append(
            f"Python {v} here cannot create virtual environments (its venv/ensurepip module is missing). "
            f"On Debian or Ubuntu: `sudo apt install python{v}-venv` (or python3-venv), then run make again.")
    if wsl and not fatal:
        notes.append("WSL2: the CPU path works as on Linux; for the GPU path install the NVIDIA driver on "
                     "Windows (not inside WSL) and use `make lab GPU=1`.")
    return fatal, notes


def gpu_notes(smi_output):
    """Notes about the NVIDIA GPUs and driver ``nvidia-smi`` reported (None: no nvidia-smi)."""
    if smi_output is None:
        return ["GPU=1, but nvidia-smi is not found: the CUDA pieces are installed anyway, and the course "
                "runs on the CPU until an NVIDIA driver is present."]
    notes = []
    for line in smi_output.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3:
            continue
        name, driver, cap = parts[:3]
        major = re.match(r"(\d+)", driver)
        if major and int(major.group(1)) < MIN_DRIVER:
            notes.append(f"{name}: driver {driver} is older than the {MIN_DRIVER} series that PyPI's CUDA 13 "
                         "build of torch needs; PyTorch will not see this GPU (the course then runs on the "
                         "CPU) until the driver is updated.")
        m = re.match(r"(\d+)\.(\d+)", cap)
        if m and (int(m.group(1)), int(m.group(2))) < MIN_CAPABILITY:
            notes.append(f"{name} has compute capability {cap}; CUDA 13 and the course's GPU path need 7.5 "
                         "or newer, so the course runs on the CPU here.")
    return notes


def _nvidia_smi():
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _is_wsl():
    try:
        with open("/proc/version") as f:
            return "microsoft" in f.read().lower()
    except OSError:
        return False


def _has_ensurepip():
    try:
        import ensurepip  # noqa: F401
        import venv  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 tools/check_platform.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--gpu", action="store_true", help="also look at the NVIDIA driver and GPU (make ... GPU=1)")
    p.add_argument("--system", default=platform.system(), help="e.g. Linux, Darwin, Windows (default: this one)")
    p.add_argument("--machine", default=platform.machine(), help="e.g. x86_64, aarch64 (default: this one)")
    p.add_argument("--python", default="{}.{}".format(*sys.version_info[:2]), help="e.g. 3.12 (default: this one)")
    args = p.parse_args(argv)
    this_machine = (args.system, args.machine) == (platform.system(), platform.machine())
    python = tuple(int(x) for x in args.python.split(".")[:2])
    this_python = python == tuple(sys.version_info[:2])
    fatal, notes = problems(args.system, args.machine, python,
                            has_ensurepip=_has_ensurepip() if this_python else True,
                            wsl=this_machine and _is_wsl())
    if fatal:
        print("The course cannot be installed here.\n" + "\n".join(fatal), file=sys.stderr)
        return 1
    if args.gpu and this_machine:
        notes += gpu_notes(_nvidia_smi())
    for note in notes:
        print("note:", note, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
