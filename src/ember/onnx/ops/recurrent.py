"""ONNX operators: recurrent family (filled in by the converter work; see onnx/_convert.py)."""

from __future__ import annotations
