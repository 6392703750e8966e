"""Graph transforms: graph autodiff (``ember.grad``, ``ember.value_and_grad``)."""

from .grad import backward_graph_values, grad, value_and_grad

__all__ = ["backward_graph_values", "grad", "value_and_grad"]
