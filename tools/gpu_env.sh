# Sourced by tools/gpu_run_all.sh and experiments/run_on_gpu.sh from the repository root: the GPU
# backend, $OUT, and the Python packages the GPU image lacks (numpy < 2.5 for numba-cuda;
# nbclient/ipykernel/ipywidgets for the notebooks) installed from wheels in .whl/ when that folder
# is present (see README). Stops the calling script when the course cannot be imported.
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
export COURSE_BACKEND=gpu PYTHONUNBUFFERED=1
if [ -d .whl ]; then
    # Once per machine: a second script sourcing this finds them installed.
    if [ ! -e /tmp/site/.from_whl ]; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
        touch /tmp/site/.from_whl
    fi
    export PYTHONPATH=/tmp/site:$PWD
else
    export PYTHONPATH=$PWD
fi
python3 -c "import course_lib; course_lib.describe()" || exit 1
