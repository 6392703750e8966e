"""Control flow as graph nodes: ``cond``, ``while_loop`` / ``fori_loop`` (flow.py, gradients in
flow_grad.py) and ``scan`` (scan.py, gradients in scan_grad.py). Importing this package
registers those ops; ember/__init__.py imports it before publishing the op functions.

Control flow sits above the graph layer and the transforms: its kernels run subgraphs with the
interpreter, its VJPs trace subgraphs with the graph builder and prune them with DCE. Inside the
package imports run one way: a forward module imports its gradient module (whose VJP it
registers), and every module imports the shared helpers of _common.py."""

from . import flow, flow_grad, scan, scan_grad  # noqa: F401  (registers the ops)
