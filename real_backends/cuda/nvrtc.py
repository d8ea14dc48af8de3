"""NVRTC: the builtin library's CUDA C (``kernels/builtin.cu``) compiled to PTX at run time.

Needs only the ``cuda`` extra (``cuda-bindings`` + ``nvidia-cuda-nvrtc``), not a GPU or a driver, so CI
compiles every kernel (``tests/real_backends/test_kernel_sources.py``). The device adapter compiles for
the device's compute capability (capped at the newest architecture NVRTC supports; the driver JITs the
PTX forward) and loads the PTX with ``cuModuleLoadData``.
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


def pick_arch(major: int, minor: int) -> int:
    """The newest NVRTC architecture not newer than the device's compute capability."""
    want = major * 10 + minor
    archs = [a for a in supported_archs() if a <= want]
    if not archs:
        raise HalError(StatusCode.UNAVAILABLE, f"cuda: NVRTC cannot target compute capability {major}.{minor} "
                       f"(supported: {supported_archs()})")
    return max(archs)


def compile_ptx(code: str | None = None, arch: int = DEFAULT_ARCH, name: str = "builtin.cu") -> str:
    """PTX of ``code`` (default: the builtin library) for ``compute_<arch>``; INTERNAL with NVRTC's log
    when it does not compile."""
    nvrtc = _nvrtc()
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    code = source("cu") if code is None else code
    err, prog = nvrtc.nvrtcCreateProgram(code.encode(), name.encode(), 0, [], [])
    if err != ok:
        raise HalError(StatusCode.INTERNAL, f"cuda: nvrtcCreateProgram failed ({err.name})")
    try:
        opts = [f"--gpu-architecture=compute_{arch}".encode(), b"--std=c++17"]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != ok:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise HalError(StatusCode.INTERNAL, f"cuda: NVRTC could not compile {name} ({err.name}):\n"
                           f"{log.decode(errors='replace').rstrip(chr(0))}")
        _, size = nvrtc.nvrtcGetPTXSize(prog)
        ptx = b" " * size
        (err,) = nvrtc.nvrtcGetPTX(prog, ptx)
        if err != ok:
            raise HalError(StatusCode.INTERNAL, f"cuda: nvrtcGetPTX failed ({err.name})")
        return ptx.rstrip(b"\0").decode()
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
