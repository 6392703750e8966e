"""``ember.return_types``: the named tuples ops return where PyTorch returns its
``torch.return_types`` (``x.max(dim)`` gives ``ember.return_types.max(values=..., indices=...)``).

Each is a ``namedtuple`` (unpacks, indexes and compares as a tuple; pickles by name) whose
repr is PyTorch's: the type's full name, then one ``field=value`` per line.
"""

from __future__ import annotations

import collections

__all__ = [
    "aminmax",
    "cummax",
    "cummin",
    "frexp",
    "histogram",
    "histogramdd",
    "kthvalue",
    "max",
    "median",
    "min",
    "mode",
    "nanmedian",
    "sort",
    "topk",
]


def _result_type(name: str, fields: tuple[str, ...]) -> type:
    base = collections.namedtuple(name, fields)

    def __repr__(self) -> str:
        body = ",\n".join(f"{field}={value!r}" for field, value in zip(self._fields, self))
        return f"ember.return_types.{name}(\n{body})"

    made = type(name, (base,), {"__slots__": (), "__repr__": __repr__, "__str__": __repr__})
    made.__module__ = __name__
    made.__qualname__ = name
    return made


_PAIR = ("values", "indices")
max = _result_type("max", _PAIR)  # noqa: A001 (PyTorch's names)
min = _result_type("min", _PAIR)  # noqa: A001
sort = _result_type("sort", _PAIR)
topk = _result_type("topk", _PAIR)
cummax = _result_type("cummax", _PAIR)
cummin = _result_type("cummin", _PAIR)
median = _result_type("median", _PAIR)
nanmedian = _result_type("nanmedian", _PAIR)
mode = _result_type("mode", _PAIR)
kthvalue = _result_type("kthvalue", _PAIR)
aminmax = _result_type("aminmax", ("min", "max"))
frexp = _result_type("frexp", ("mantissa", "exponent"))
histogram = _result_type("histogram", ("hist", "bin_edges"))
histogramdd = _result_type("histogramdd", ("hist", "bin_edges"))
linalg_cholesky_ex = _result_type("linalg_cholesky_ex", ("L", "info"))
linalg_inv_ex = _result_type("linalg_inv_ex", ("inverse", "info"))
linalg_solve_ex = _result_type("linalg_solve_ex", ("result", "info"))
linalg_lu_factor = _result_type("linalg_lu_factor", ("LU", "pivots"))
linalg_lu_factor_ex = _result_type("linalg_lu_factor_ex", ("LU", "pivots", "info"))
linalg_lu = _result_type("linalg_lu", ("P", "L", "U"))
lu_unpack = _result_type("lu_unpack", ("P", "L", "U"))
geqrf = _result_type("geqrf", ("a", "tau"))
_lu_with_info = _result_type("_lu_with_info", ("LU", "pivots", "info"))
triangular_solve = _result_type("triangular_solve", ("solution", "cloned_coefficient"))
linalg_ldl_factor = _result_type("linalg_ldl_factor", ("LD", "pivots"))
linalg_ldl_factor_ex = _result_type("linalg_ldl_factor_ex", ("LD", "pivots", "info"))
# the linear-algebra factorizations (torch.linalg's, and the older torch.qr/svd/slogdet)
linalg_qr = _result_type("linalg_qr", ("Q", "R"))
qr = _result_type("qr", ("Q", "R"))
linalg_svd = _result_type("linalg_svd", ("U", "S", "Vh"))
svd = _result_type("svd", ("U", "S", "V"))
linalg_eig = _result_type("linalg_eig", ("eigenvalues", "eigenvectors"))
linalg_eigh = _result_type("linalg_eigh", ("eigenvalues", "eigenvectors"))
linalg_slogdet = _result_type("linalg_slogdet", ("sign", "logabsdet"))
slogdet = _result_type("slogdet", ("sign", "logabsdet"))
linalg_lstsq = _result_type("linalg_lstsq", ("solution", "residuals", "rank", "singular_values"))
