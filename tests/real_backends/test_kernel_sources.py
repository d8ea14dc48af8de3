"""The builtin library's CUDA C and MSL sources (``real_backends/common/kernels``) against the kernel ABI
(``kernel_abi``): CUDA C compiled to PTX and CUBINs by NVRTC (no GPU needed), MSL checked by parsing — and
compiled with ``xcrun metal`` where that exists (macOS with Xcode)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from real_backends.common.kernel_abi import entry_points, source, symbol
from reference.kernels import LIBRARY


def _nvrtc_or_skip():
    try:
        from cuda.bindings import nvrtc  # noqa: F401
    except ImportError as e:
        pytest.skip(f"the 'cuda' extra (cuda-bindings, nvidia-cuda-nvrtc) is not installed: {e}")


def test_cuda_sources_compile_to_ptx_with_every_entry_point():
    _nvrtc_or_skip()
    from real_backends.cuda.nvrtc import compile_ptx, supported_archs

    archs = supported_archs()
    for arch in (min(archs), max(archs)):
        ptx = compile_ptx(arch=arch)
        entries = re.findall(r"\.entry\s+(\w+)\s*\(", ptx)
        assert sorted(entries) == sorted(entry_points()), f"compute_{arch}: {entries}"
        assert f".target sm_{arch}" in ptx


def test_cuda_sources_compile_to_a_cubin_per_architecture():
    """The image the adapter prefers (``nvrtc.pick_image``): CUDA ELF machine code for ``sm_<arch>``
    (e_machine 190, the architecture in e_flags bits 8-15) with a ``.text`` section per entry point."""
    _nvrtc_or_skip()
    import struct

    from real_backends.cuda.nvrtc import compile_cubin, supported_archs

    for arch in (min(supported_archs()), 90, max(supported_archs())):
        cubin = compile_cubin(arch=arch)
        assert cubin[:4] == b"\x7fELF" and struct.unpack_from("<H", cubin, 18) == (190,)
        assert (struct.unpack_from("<I", cubin, 48)[0] >> 8) & 0xFF == arch
        entries = sorted({n.decode() for n in re.findall(rb"\.text\.(\w+)\0", cubin)})
        assert entries == sorted(entry_points()), f"sm_{arch}: {entries}"


def test_cuda_image_choice_per_compute_capability():
    _nvrtc_or_skip()
    from real_backends.cuda.nvrtc import pick_image, supported_archs

    newest = max(supported_archs())
    assert pick_image(9, 0) == ("cubin", 90)
    assert pick_image(8, 9) == ("cubin", 89)
    assert pick_image(8, 5) == ("cubin", 80)    # CUBINs run forward within a major version
    assert pick_image(99, 0) == ("ptx", newest)  # newer than NVRTC: PTX the driver JITs forward
    from reference.hal import HalError, StatusCode
    with pytest.raises(HalError) as e:
        pick_image(5, 0)
    assert e.value.code == StatusCode.UNAVAILABLE and "compute capability 5.0" in e.value.message


def test_cuda_ptx_parameters_follow_the_abi():
    """Per binding a 64-bit pointer and a 64-bit offset, then the 32-bit constants and n."""
    _nvrtc_or_skip()
    from real_backends.cuda.nvrtc import compile_ptx

    ptx = compile_ptx()
    for spec in LIBRARY:
        m = re.search(rf"\.entry\s+{symbol(spec.name)}\s*\((.*?)\)", ptx, re.S)
        assert m, spec.name
        params = re.findall(r"\.param\s+\.(\w+)", m.group(1))
        want = ["u64", "u64"] * spec.binding_count + ["u32"] * (spec.constant_count + 1)
        assert params == want, (spec.name, params)


def test_cuda_compile_error_reports_the_nvrtc_log():
    _nvrtc_or_skip()
    from real_backends.cuda.nvrtc import compile_ptx
    from reference.hal import HalError, StatusCode

    with pytest.raises(HalError) as e:
        compile_ptx('extern "C" __global__ void broken() { undefined_name; }')
    assert e.value.code == StatusCode.INTERNAL and "undefined_name" in str(e.value)


def test_cuda_source_signatures():
    """Every entry point is ``extern "C" __global__`` with the ABI's parameter list (checked in the text,
    independent of NVRTC)."""
    src = source("cu")
    for spec in LIBRARY:
        m = re.search(rf'extern "C" __global__ void {symbol(spec.name)}\((.*?)\)\s*{{', src, re.S)
        assert m, spec.name
        params = [p.strip() for p in m.group(1).split(",")]
        want = []
        for k in range(spec.binding_count):
            want += [f"unsigned char* b{k}", f"unsigned long long o{k}"]
        assert params[:2 * spec.binding_count] == want, spec.name
        assert len(params) == 2 * spec.binding_count + spec.constant_count + 1, spec.name
        assert all(p.startswith("unsigned int ") for p in params[2 * spec.binding_count:]), spec.name
        assert params[-1] == "unsigned int n", spec.name


_MSL_KERNEL = re.compile(r"kernel\s+void\s+(\w+)\s*\((.*?)\)\s*{(.*?)\n}", re.S)


def _msl_kernels() -> dict[str, tuple[str, str]]:
    return {m.group(1): (m.group(2), m.group(3)) for m in _MSL_KERNEL.finditer(source("metal"))}


def test_msl_sources_declare_every_entry_point_with_its_bindings():
    kernels = _msl_kernels()
    for spec in LIBRARY:
        name = symbol(spec.name)
        assert name in kernels, f"{name} missing from builtin.metal"
        params, body = kernels[name]
        b = spec.binding_count
        buffers = re.findall(r"device\s+uchar\*\s+b(\d+)\s+\[\[buffer\((\d+)\)\]\]", params)
        assert [(int(x), int(y)) for x, y in buffers] == [(k, k) for k in range(b)], (name, buffers)
        assert re.search(rf"constant\s+uint\*\s+params\s+\[\[buffer\({b}\)\]\]", params), name
        assert re.search(r"uint\s+i\s+\[\[thread_position_in_grid\]\]", params), name
        # params = [o0 .. o(B-1), c0 .., n]: n is read at index B + constants and guards the body
        n_index = b + spec.constant_count
        assert re.search(rf"uint n = params\[{n_index}\]; if \(i >= n\) return;", body), (name, n_index)
        used = {int(x) for x in re.findall(r"params\[(\d+)\]", body)}
        assert max(used) == n_index, (name, used)


def test_msl_sources_have_the_planner_helper_kernels():
    kernels = _msl_kernels()
    assert {"fill_buffer_generic", "copy_buffer_generic"} <= set(kernels)


@pytest.mark.skipif(shutil.which("xcrun") is None, reason="xcrun (Xcode's Metal compiler) is not installed: "
                    "the MSL sources are only parsed here")
def test_msl_sources_compile_with_xcrun(tmp_path):
    src = tmp_path / "builtin.metal"
    src.write_text(source("metal"))
    subprocess.run(["xcrun", "-sdk", "macosx", "metal", "-c", str(src), "-o", str(tmp_path / "builtin.air")],
                   check=True, timeout=120)
