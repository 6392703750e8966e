"""ember: a deep-learning framework built around the computation graph.

This module only assembles the public API: the dtypes, the Tensor, autograd switches, and every
function the op modules export (``ember.add``, ``ember.matmul``, ...), plus the subpackages.
"""

import math as _math
import sys as _sys
import warnings as _warnings

# PyTorch's kernels warn about no floating-point event (log(0), 0/0 and overflow give inf and
# NaN silently); NumPy's warn, attributed to the line that called them, which for ember's
# kernels is ember's own code: those are silenced, the user's own NumPy calls keep theirs
_warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"ember\.")

from . import _allocator, _methods, _tensor_extras, _unsafe_split  # noqa: E402, F401
from . import capture as _capture
from . import control as _control  # registers cond, while_loop, scan
from . import dtypes as _dtypes
from . import eager as _eager  # noqa: E402  (installs the eager mode)
from . import functional as _functional  # registers the composites (activations, losses, ...)
from . import ops as _ops  # registers every op
from . import tensor_api as _tensor_api
from ._storage import TypedStorage, UntypedStorage  # noqa: F401  (torch.UntypedStorage)
from .autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .dtypes import (
    DType,
    bfloat16,
    bool_,
    cdouble,
    cfloat,
    complex64,
    complex128,
    float8_e4m3fn,
    float8_e4m3fnuz,
    float8_e5m2,
    float8_e5m2fnuz,
    float16,
    float32,
    float64,
    get_default_complex_dtype,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    qint8,
    qint32,
    quint8,
    result_type,
    set_default_dtype,
    uint8,
    uint16,
    uint32,
    uint64,
)
from .dtypes import DType as dtype  # noqa: E402  (torch.dtype: isinstance(x, ember.dtype))
from .errors import (
    AutogradError,
    CheckpointError,
    DatasetError,
    DivisionByZeroError,
    DTypeError,
    EmberError,
    OnnxError,
    OutOfMemoryError,
    RNGStateError,
    ScriptError,
    ShapeError,
    StateDictError,
    TraceError,
)
from .ops import _factory_kwargs, _torch_keywords
from .tensor import Tensor

_factory_kwargs.install(_ops.PUBLIC, _ops.METHODS)
_methods.install(Tensor)
_methods.install(_capture.SymbolicTensor)
_tensor_api.install(Tensor)
_tensor_api.install(_capture.SymbolicTensor)
_tensor_extras.install(Tensor)
_tensor_extras.install(_capture.SymbolicTensor)
_allocator.tune()
globals().update(_torch_keywords.with_torch_keywords(_ops.PUBLIC, out=True))
# torch.lstsq, torch.symeig, ...: removed in PyTorch 1.9, still names that raise its error
globals().update(_ops.legacy_linalg.REMOVED)
for _name in ("lstsq", "symeig", "eig", "solve"):
    setattr(Tensor, _name, _ops.legacy_linalg.REMOVED[_name])

from . import (  # noqa: E402
    autograd,
    data,
    distributed,
    distributions,
    fft,
    io,
    linalg,
    nn,
    optim,
    profiler,
    ragged,
    serialization,  # noqa: E402, F401  (torch.serialization)
    signal,
    special,
    testing,
    tools,
)
from .capture import trace  # noqa: E402
from .capture.function import Function, function  # noqa: E402
from .capture.grad import grad, value_and_grad  # noqa: E402
from .capture.script import script  # noqa: E402
from .capture.signature import TensorSpec  # noqa: E402
from .capture.static import (
    Operation,
    Session,
    SessionError,
    Variable,
    get_default_graph,
    init_scope,
    placeholder,
)  # noqa: E402,F401
from .graph import Graph, sym  # noqa: E402
from .graph.load import load_graph  # noqa: E402
from .io import load, save  # noqa: E402
from .kernels.cpool import get_num_threads, set_num_threads  # noqa: E402
from .random import (  # noqa: E402,F401
    Generator,
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)
from .tools.summary import summary  # noqa: E402
from .typeinfo import can_cast, finfo, iinfo, promote_types  # noqa: E402

bool = bool_  # ember.bool, as torch.bool  # noqa: A001
float = float32  # noqa: A001
double = float64
half = float16
long = int64
int = int32  # noqa: A001
short = int16

# PyTorch's constants (torch.pi, torch.inf, ...: masks fill with -ember.inf)
pi = _math.pi
e = _math.e
inf = _math.inf
nan = _math.nan
newaxis = None

from . import (  # noqa: E402
    _dynamo,
    _inductor,
    accelerator,
    amp,
    ao,
    backends,
    compiler,
    cpu,
    cuda,
    export,
    func,
    jit,
    library,
    multiprocessing,
    onnx,
    quantization,
    quasirandom,
    return_types,
    sparse,
    utils,
)
from .accelerator import get_device_module  # noqa: E402
from .amp import (  # noqa: E402
    GradScaler,
    autocast,
    autocast_decrement_nesting,
    autocast_increment_nesting,
    clear_autocast_cache,
    get_autocast_cpu_dtype,
    get_autocast_dtype,
    is_autocast_cache_enabled,
    is_autocast_cpu_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_cpu_dtype,
    set_autocast_cpu_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)
from .func import vmap  # noqa: E402  (torch.vmap)

cuda.amp = amp.cuda_amp  # torch.cuda.amp's spelling (ember.cuda is below the eager layer)
cpu.amp = amp.cpu_amp  # torch.cpu.amp's, likewise
from . import grad_mode as _grad_mode_module  # noqa: E402
from . import overrides  # noqa: E402  (torch.overrides)
from ._missing import module_getattr as _module_getattr  # noqa: E402
from .capture.compiled import compile  # noqa: E402,A004
from .devices import (  # noqa: E402
    channels_last,
    channels_last_3d,
    contiguous_format,
    device,
    get_default_device,
    memory_format,
    preserve_format,
    set_default_device,
)
from .errors import DeviceError, NotInEmberError  # noqa: E402
from .flags import (  # noqa: E402
    are_deterministic_algorithms_enabled,
    get_deterministic_debug_mode,
    get_float32_matmul_precision,
    get_num_interop_threads,
    is_deterministic_algorithms_warn_only_enabled,
    is_warn_always_enabled,
    set_deterministic_debug_mode,
    set_float32_matmul_precision,
    set_flush_denormal,
    set_num_interop_threads,
    set_warn_always,
    use_deterministic_algorithms,
)
from .grad_mode import (  # noqa: E402
    inference_mode,
    is_anomaly_enabled,
    is_inference_mode_enabled,
)
from .grad_mode import set_detect_anomaly as set_anomaly_enabled  # noqa: E402
from .ops._factory_kwargs import _Layout as layout  # noqa: E402  (torch.layout, the type)
from .ops._factory_kwargs import sparse_coo, sparse_csr, strided  # noqa: E402
from .ops.qtensor import QSCHEMES as _QSCHEMES  # noqa: E402
from .ops.sparse_tensor import sparse_coo_tensor  # noqa: E402

globals().update(_QSCHEMES)  # ember.per_tensor_affine, ... (torch.qscheme's values)
from .overrides import sym_float, sym_int, sym_ite, sym_max, sym_min, sym_not, sym_sqrt  # noqa: E402,F401
from .printing import get_printoptions, set_printoptions  # noqa: E402
from .size import Size  # noqa: E402
from .tensor_api import _assert, is_tensor, numel  # noqa: E402

globals().update(_tensor_api.LEGACY_TYPES)  # ember.FloatTensor, ember.LongTensor, ...

from . import version  # noqa: E402  (torch.version's names)

__version__ = version.__version__

# ember.autograd.Function, .functional and .grad live in modules above the engine (they
# build on it, so autograd.py cannot import them without a cycle); attached here
from . import autograd_forward_ad as _autograd_forward_ad  # noqa: E402
from . import autograd_function as _autograd_function  # noqa: E402
from . import autograd_functional as _autograd_functional  # noqa: E402
from . import autograd_grad as _autograd_grad  # noqa: E402
from . import autograd_profiler as _autograd_profiler  # noqa: E402

autograd.Function = _autograd_function.Function
autograd.FunctionCtx = _autograd_function.FunctionCtx
autograd.function = _autograd_function  # torch.autograd.function (once_differentiable, ...)
autograd.functional = _autograd_functional
autograd.forward_ad = _autograd_forward_ad
autograd.grad = _autograd_grad.grad
autograd.gradcheck = _autograd_functional.gradcheck
autograd.gradgradcheck = _autograd_functional.gradgradcheck
autograd.inference_mode = inference_mode
autograd.grad_mode = _grad_mode_module  # torch.autograd.grad_mode (no_grad, inference_mode, ...)
autograd.Variable = _tensor_api.Variable  # torch.autograd.Variable: a tensor, as PyTorch's
autograd.profiler = _autograd_profiler  # torch.autograd.profiler, the older profiler API
_sys.modules.setdefault("ember.autograd.function", _autograd_function)
_sys.modules.setdefault("ember.autograd.functional", _autograd_functional)
_sys.modules.setdefault("ember.autograd.profiler", _autograd_profiler)
_sys.modules.setdefault("ember.autograd.forward_ad", _autograd_forward_ad)

# ``__torch_function__``: a program's first Tensor subclass makes the public functions and the
# tensor methods dispatch (ember/_torch_function.py); Parameter opts out, as PyTorch's
from . import _torch_function  # noqa: E402

nn.Parameter.__torch_function__ = _torch_function.disabled_torch_function_impl
_sys.modules["ember.tensor"].SUBCLASS_HOOKS.append(
    lambda cls: _torch_function.subclass_defined(cls, [_sys.modules[__name__], nn.functional])
)

# ``ember.jit`` and other PyTorch names ember lacks: a NotInEmberError naming the alternative
__getattr__ = _module_getattr("ember", globals())
