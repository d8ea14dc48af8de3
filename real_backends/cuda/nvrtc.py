"""NVRTC: the builtin library's CUDA C (``kernels/builtin.cu``) compiled at run time.

Needs only the ``cuda`` extra (``cuda-bindings`` + ``nvidia-cuda-nvrtc``), not a GPU or a driver, so CI
compiles every kernel (``tests/real_backends/test_kernel_sources.py``). The device adapter loads, with
``cuModuleLoadData``, the image :func:`pick_image` chooses for the device's compute capability:

* a **CUBIN** (machine code) when NVRTC supports an architecture the device runs — the same major
  version, a minor version not above the device's. The preferred image: CUDA's minor-version
  compatibility lets a driver of an older release of the same major version (e.g. 580, CUDA 13.0)
  load a CUBIN built by a newer NVRTC (13.5), while it cannot JIT that NVRTC's PTX
  (``CUDA_ERROR_UNSUPPORTED_PTX_VERSION``: PTX ISA 9.5 on a 13.0 driver).
* else **PTX** for the newest architecture not above the device's (a device newer than NVRTC knows),
  which the driver JITs forward — when the driver is at least as new as NVRTC.
"""

from __future__ import annotations

from reference.hal import HalError, StatusCode

from ..common.kernel_abi import source

DEFAULT_ARCH = 75  # the oldest architecture NVRTC 13 supports


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:
        raise HalError(StatusCode.UNAVAILABLE, f"cuda: cuda-bindings (NVRTC) is not installed ({e}); install the "
                       "'cuda' extra: pip install -e '.[cuda]'") from None
    return nvrtc


def supported_archs() -> list[int]:
    nvrtc = _nvrtc()
    err, archs = nvrtc.nvrtcGetSupportedArchs()
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise HalError(StatusCode.UNAVAILABLE, f"cuda: nvrtcGetSupportedArchs failed ({err.name})")
    return list(archs)


def nvrtc_version() -> tuple[int, int]:
    """NVRTC's (major, minor) CUDA release, e.g. (13, 5)."""
    nvrtc = _nvrtc()
    err, major, minor = nvrtc.nvrtcVersion()
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise HalError(StatusCode.UNAVAILABLE, f"cuda: nvrtcVersion failed ({err.name})")
    return major, minor


def pick_arch(major: int, minor: int) -> int:
    """The newest NVRTC architecture not newer than the device's compute capability."""
    want = major * 10 + minor
    archs = [a for a in supported_archs() if a <= want]
    if not archs:
        raise HalError(StatusCode.UNAVAILABLE, f"cuda: NVRTC cannot target compute capability {major}.{minor} "
                       f"(supported: {supported_archs()})")
    return max(archs)


def pick_image(major: int, minor: int) -> tuple[str, int]:
    """``("cubin", arch)`` when NVRTC can build machine code the device runs (an architecture of the
    same major version, minor not above the device's: CUBINs run forward within a major version only),
    else ``("ptx", arch)`` with :func:`pick_arch`'s architecture."""
    same_major = [a for a in supported_archs() if a // 10 == major and a % 10 <= minor]
    if same_major:
        return "cubin", max(same_major)
    return "ptx", pick_arch(major, minor)


def compile_image(kind: str, arch: int, code: str | None = None, name: str = "builtin.cu") -> bytes:
    """``compile_cubin`` or ``compile_ptx`` (as bytes, NUL-terminated), as ``cuModuleLoadData`` takes."""
    if kind == "cubin":
        return compile_cubin(code, arch, name)
    return compile_ptx(code, arch, name).encode() + b"\0"


def compile_ptx(code: str | None = None, arch: int = DEFAULT_ARCH, name: str = "builtin.cu") -> str:
    """PTX of ``code`` (default: the builtin library) for ``compute_<arch>``; INTERNAL with NVRTC's log
    when it does not compile."""
    nvrtc = _nvrtc()
    ptx = _compile(code, f"compute_{arch}", name, nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX, "nvrtcGetPTX")
    return ptx.rstrip(b"\0").decode()


def compile_cubin(code: str | None = None, arch: int = DEFAULT_ARCH, name: str = "builtin.cu") -> bytes:
    """A CUBIN (ELF machine code) of ``code`` for ``sm_<arch>``; INTERNAL with NVRTC's log when it does
    not compile."""
    nvrtc = _nvrtc()
    return _compile(code, f"sm_{arch}", name, nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN, "nvrtcGetCUBIN")


def _compile(code: str | None, target: str, name: str, get_size, get, what: str) -> bytes:
    """Compile for ``--gpu-architecture=<target>`` and fetch the output with ``get_size``/``get``."""
    nvrtc = _nvrtc()
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    code = source("cu") if code is None else code
    err, prog = nvrtc.nvrtcCreateProgram(code.encode(), name.encode(), 0, [], [])
    if err != ok:
        raise HalError(StatusCode.INTERNAL, f"cuda: nvrtcCreateProgram failed ({err.name})")
    try:
        opts = [f"--gpu-architecture={target}".encode(), b"--std=c++17"]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != ok:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise HalError(StatusCode.INTERNAL, f"cuda: NVRTC could not compile {name} for {target} ({err.name}):\n"
                           f"{log.decode(errors='replace').rstrip(chr(0))}")
        _, size = get_size(prog)
        out = b" " * size
        (err,) = get(prog, out)
        if err != ok:
            raise HalError(StatusCode.INTERNAL, f"cuda: {what} failed ({err.name})")
        return out
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
