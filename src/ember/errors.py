"""ember's error hierarchy and the user-source locator.

Every error ember raises on bad input is an `EmberError`. Errors about a specific op say which op,
show the shapes or dtypes involved, and end with the user's own file:line: the innermost stack
frame that lies outside the ember package. `EmberError` is a RuntimeError, as every error
PyTorch's C++ core raises is (a value out of range, a bad probability, a failed check), and its
subclasses also derive from the more specific built-in exception PyTorch raises for their case
(IndexError for an index out of range, TypeError for a wrong type, ValueError where PyTorch's
Python layer checks an argument), so a PyTorch program's ``except RuntimeError`` /
``except IndexError`` / ``except ValueError`` around a call catches ember's error too.
"""

from __future__ import annotations

import os
import pickle
import sys

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_frame():
    """The innermost frame outside ember's own source (None if there is none)."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not os.path.abspath(filename).startswith(_PACKAGE_DIR):
            return frame
        frame = frame.f_back
    return None


def user_stacklevel() -> int:
    """The ``stacklevel`` at which a warning raised by this function's caller names the user's
    line: counted, since the frames between depend on the path taken (a wrapper such as
    ``__torch_function__``'s adds one)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    return level if frame is not None else 1


def user_location() -> str:
    """'file:line' of the innermost frame outside ember, or '' when called from ember alone."""
    frame = user_frame()
    if frame is None:
        return ""
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


class EmberError(RuntimeError):
    """Base class of all errors ember raises about its input or state (a RuntimeError, as
    PyTorch's own errors are).

    ``op`` names the operation that failed (if any); ``location`` is the user's file:line,
    captured when the error is created.
    """

    def __init__(self, message: str, *, op: str | None = None, location: str | None = None):
        self.op = op
        self.location = user_location() if location is None else location
        self.detail = message
        text = f"{op}: {message}" if op else message
        if self.location:
            text += f"\n  at {self.location}"
        super().__init__(text)


class ShapeError(EmberError, ValueError, RuntimeError):
    """Operand shapes that an op cannot accept. Also a RuntimeError: PyTorch raises one for a
    shape mismatch, so ``except RuntimeError`` in a PyTorch program catches it here too."""


class DTypeError(EmberError, TypeError, RuntimeError):
    """Operand dtypes that an op cannot accept (also a RuntimeError, as PyTorch raises)."""


class KernelDTypeError(DTypeError, NotImplementedError):
    """A floating-point-only op given integers or bools. PyTorch has no kernel for that dtype and
    raises NotImplementedError (``"softmax_lastdim_kernel_impl" not implemented for 'Long'``),
    a RuntimeError; this is both, and a DTypeError."""


class ComplexDTypeError(KernelDTypeError):
    """A complex operand of an op that takes none (its ``complex`` rule, ops/_rules.py), or one
    requiring grad of an op that computes complex values without a gradient. PyTorch raises
    ``"..." not implemented for 'ComplexFloat'``, a NotImplementedError (a RuntimeError)."""


class ArgumentError(EmberError, ValueError, RuntimeError):
    """An argument's value an op cannot accept (``randint(5, 2)``: an empty range). A
    ValueError, and a RuntimeError as PyTorch raises."""


class ArgumentTypeError(EmberError, TypeError):
    """An argument of a type an op cannot accept where PyTorch's binding raises TypeError (a
    float where an integer label is needed)."""


class UnsupportedError(EmberError, NotImplementedError, ValueError):
    """An input or option PyTorch has no kernel for, where it raises NotImplementedError (a
    RuntimeError): ``interpolate(mode="bilinear")`` of a 3-D input, an unknown mode. Also a
    ValueError."""


class AxisError(ShapeError, IndexError):
    """A dimension index out of range for a tensor's rank (also an IndexError, as PyTorch
    raises: ``x.sum(5)`` on a matrix)."""


class IndexTypeError(DTypeError, IndexError):
    """An index tensor of a dtype that cannot index (float): PyTorch raises an IndexError."""


class AutogradError(EmberError, RuntimeError):
    """Misuse of the autograd engine (freed graph, missing gradient, in-place conflicts)."""


class DivisionByZeroError(EmberError, ZeroDivisionError, RuntimeError):
    """Integer floor division or remainder by zero (PyTorch raises a RuntimeError saying
    ZeroDivisionError; this is both)."""


class StateDictError(EmberError, KeyError, RuntimeError):
    """A state_dict that does not fit the module or optimizer it is loaded into (also a
    RuntimeError, as PyTorch's load_state_dict raises)."""

    def __str__(self) -> str:  # KeyError would otherwise print the message in quotes
        return Exception.__str__(self)


class RNGStateError(EmberError, ValueError):
    """A random generator state (`Generator.set_state`, `ember.set_rng_state`) that is not one
    `get_state` could have produced: a missing or extra field, a value out of its range."""


class CheckpointError(EmberError, OSError):
    """A checkpoint file that is missing, truncated, corrupt or not an ember checkpoint."""


class CheckpointRefusedError(CheckpointError, pickle.UnpicklingError):
    """A checkpoint naming a class or function the program has not allowed: PyTorch's
    weights-only refusal, which it raises as ``pickle.UnpicklingError`` (programs catch that
    to retry with ``weights_only=False``)."""


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """A checkpoint path that names no file (PyTorch's ``torch.load`` raises
    FileNotFoundError)."""


class OnnxError(EmberError, ValueError):
    """An ONNX model ember cannot read, run or write: a damaged file, an unknown operator or
    opset, an input of the wrong name, shape or dtype, or an ember op with no ONNX form."""


class QuantizationError(EmberError, ValueError):
    """Quantization parameters or calibration data ember cannot use: a scale that is not
    positive and finite, a zero point outside the integer range, non-finite or empty
    calibration data, an unknown calibration method."""


class TraceError(EmberError, RuntimeError):
    """A traced program used a tensor's value in Python (data-dependent control flow)."""


class NeedsArgumentValue(TraceError):
    """A traced function read, as host data, the value of one of its own tensor arguments
    (the lengths a sequence is packed with, ``lengths.tolist()``). ``argument`` is that
    argument's position among the call's tensor leaves (set by the capture that sees it), so
    ``ember.function`` can specialize its graphs on that argument's value."""

    def __init__(self, message: str, *, value=None, argument: int | None = None, **kwargs):
        super().__init__(message, **kwargs)
        self.value = value  # the graph Value of the argument read
        self.argument = argument


class DatasetError(EmberError, FileNotFoundError):
    """A dataset whose files cannot be found or read."""


class ScriptError(EmberError):
    """A construct ``ember.script`` cannot convert, or converted control flow whose branches or
    loop iterations disagree (names the construct and the user's file:line)."""


class DeviceError(EmberError, AssertionError):
    """A device ember does not have: ember runs on the CPU only (``"cuda"``, ``"mps"``, ...).
    Also an AssertionError: a CPU build of PyTorch raises one for ``x.cuda()`` or
    ``device="cuda"`` ("Torch not compiled with CUDA enabled"), and a RuntimeError for the
    others."""


class DeviceMismatchError(EmberError):
    """Operands on two devices: a CPU tensor of at least one dimension beside a meta tensor
    (a 0-d CPU tensor mixes as a number, as in PyTorch). PyTorch's RuntimeError, in its words:
    the device of the first operand is the one expected."""


class MetaDataError(EmberError, TypeError, NotImplementedError):
    """A meta tensor's values asked for: it has a shape and a dtype and no data (``.item()``,
    ``.numpy()``, ``.tolist()``, a copy to the CPU). PyTorch raises a RuntimeError, a TypeError
    or a NotImplementedError, by the call; this is each of them."""


class NotInEmberError(EmberError, AttributeError):
    """A name PyTorch has and ember does not (``ember.jit``, ``Tensor.pin_memory``, ...); the
    message names it and, where one exists, ember's alternative."""

    def __init__(self, message: str, *, name: str | None = None, obj=None, **kwargs):
        super().__init__(message, **kwargs)
        self.name = name
        self.obj = obj


class LinAlgError(EmberError, RuntimeError):
    """A linear-algebra routine that cannot complete on its input: a singular matrix for
    ``inv`` or ``solve``, one that is not positive-definite for ``cholesky`` (PyTorch raises
    ``torch.linalg.LinAlgError``, a RuntimeError). The message names the batch element."""


class OutOfMemoryError(EmberError, MemoryError):
    """An allocation the machine refused, raised by the op that asked for it with its
    operands' shapes: PyTorch's ``torch.OutOfMemoryError`` (also ``torch.cuda``'s; its CPU
    allocator raises a RuntimeError, which this is, so ``except RuntimeError`` catches it as
    it catches PyTorch's), and a MemoryError, as NumPy's own is."""
