"""Capturing programs into graphs: ``ember.trace``, ``ember.function``, ``ember.grad``, AOT
autograd, ``ember.script`` and define-then-run Sessions.

The modules, by what they own:

* trace.py: ``ember.trace`` and `capture_call`, which records one call into a `CapturedCall`
  (call.py: the joint graph, a typed `Feed` per input, the result's structure, the writebacks);
* state.py: the state a captured function reads and writes (discovery, snapshot, writebacks);
* compile.py: `CompileOptions` and the steps from a captured call to a program (passes, memory
  budget, the executor of runtime/executors.py);
* graph_function.py: `GraphFunction`, the compiled call that runs and shows its graphs;
* aot.py: the AOT backward of a call whose gradient eager autograd asks for;
* function.py and signature.py: ``ember.function``, its cache keyed by call signatures;
* grad.py: the function transforms ``ember.grad`` / ``ember.value_and_grad``;
* script*.py: ``ember.script``; static.py: placeholders, Variables and Sessions.
"""

from ..graph.builder import GraphBuilder
from ..graph.symbolic_tensor import SymbolicTensor
from .graph_function import GraphFunction
from .trace import trace

__all__ = ["GraphBuilder", "GraphFunction", "SymbolicTensor", "trace"]
