"""PyTorch's sign for a NaN that an op creates from operands that are not NaN (``log(-1)``,
``sqrt(-2)``, ``(-2) ** 0.5``): positive in float32 and float64, where PyTorch's CPU kernels
(SLEEF's vector functions, std::pow) return the quiet NaN constant. NumPy's loops and glibc's
functions give the x86 default NaN instead, whose sign bit is set; the sign is what
``torch.signbit``, ``copysign`` and every later sign copy read. 16-bit floats keep the set
sign: PyTorch computes them through float32 with the default NaN too.

`positive_created_nan` wraps a NumPy kernel; `NAN` is the C expressions' spelling of the same
NaN (kernels/cfuse_source.py gives it per result dtype), so fused loops agree with the kernels.
"""

from __future__ import annotations

import numpy as np

__all__ = ["negative_domain", "positive_created_nan"]

_WIDE = (np.dtype(np.float32), np.dtype(np.float64))


def negative_domain(call: str) -> str:
    """The C expression ``call`` of a function defined for x >= 0 (log, sqrt): below, the
    created NaN ``{nan}``; a NaN x is not below and passes through the call with its sign."""
    return "(({0}) < 0 ? {nan} : " + call + ")"


def positive_created_nan(ufunc):
    """``ufunc`` whose NaN results are +NaN in float32/float64 where no operand is NaN. The
    check costs nothing when the ufunc raised no invalid-operation flag (NumPy reads the flags
    after every loop); only a call that created a NaN runs again and is mended. NumPy's
    warnings are silenced as PyTorch computes these edges silently."""

    def kernel(*arrays):
        with np.errstate(all="ignore", invalid="raise"):
            try:
                return ufunc(*arrays)
            except FloatingPointError:
                pass
        with np.errstate(all="ignore"):
            out = np.asarray(ufunc(*arrays))
            if out.dtype in _WIDE:
                created = np.isnan(out)
                for a in arrays:
                    created &= ~np.isnan(a)
                np.copyto(out, out.dtype.type(np.nan), where=created)
        return out

    kernel.__name__ = getattr(ufunc, "__name__", "kernel")
    return kernel
