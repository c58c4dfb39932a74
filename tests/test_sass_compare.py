"""experiments/sass_compare.py: two SASS snapshots compared kernel by kernel (no GPU, no compiler:
small listings written here in cuobjdump's layout)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("sass_compare", ROOT / "experiments" / "sass_compare.py")
sass_compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sass_compare)

STAGE7 = "_ZN2tc6stage76kernelILi128ELb1ELb0EEEv14CUtensorMap_stS2_S2_NS0_6ScalesENS_12GroupedTilesEiii"


def listing(functions: dict[str, list[str]]) -> str:
    """A cuobjdump --dump-sass listing of ``functions`` (symbol -> instructions)."""
    lines = ["", "\tcode for sm_90a"]
    for symbol, code in functions.items():
        lines.append(f"\t\tFunction : {symbol}")
        for i, ins in enumerate(code):
            lines.append(f"        /*{16 * i:04x}*/                   {ins} ;   /* 0x{i:016x} */")
            lines.append(f"                                                  /* 0x{7 * i:016x} */")
    return "\n".join(lines) + "\n"


def test_bool_template_arguments_name_stage_7s_instances_apart():
    assert sass_compare.name_of(STAGE7) == "tc::stage7::kernel<128,true,false>"
    assert sass_compare.name_of("_ZN2tc6stage56kernelILi2EEEv") == "tc::stage5::kernel<2>"
    assert sass_compare.name_of("fast_matmul_kernel") == "fast_matmul_kernel"


def test_folders_compare_set_by_set_and_kernel_by_kernel(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    before.mkdir()
    after.mkdir()
    same = {"fast_matmul_kernel": ["LDC R1, c[0x0][0x28]", "EXIT"]}
    (before / "a.sass").write_text(listing(same))
    (after / "a.sass").write_text(listing(same))
    (before / "b.sass").write_text(listing({STAGE7: ["IMAD R2, R3, R4, RZ", "HGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR4], R24", "EXIT"]}))
    (after / "b.sass").write_text(listing({STAGE7: ["IMAD R2, R3, R4, RZ", "HGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR8], R24", "EXIT"]}))
    (before / "gone.sass").write_text(listing(same))
    rows = {(r["set"], r["before"]): r for r in sass_compare.compare_folders(before, after, {})}
    assert rows[("a", "fast_matmul_kernel")]["result"] == "identical"
    assert rows[("a", "fast_matmul_kernel")]["encodings"] == "identical"
    differs = rows[("b", "tc::stage7::kernel<128,true,false>")]
    assert (differs["result"], differs["first_difference"], differs["n_before"], differs["n_after"]) == ("differs", 1, 3, 3)
    assert differs["now"] == "HGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR8], R24"
    assert rows[("gone", None)]["result"] == "absent after"
    assert sass_compare.main([str(before), str(after)]) == 1
    assert sass_compare.main([str(before / "a.sass"), str(after / "a.sass")]) == 0
