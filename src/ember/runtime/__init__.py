"""Executors of graphs: the reference interpreter and Python code generation."""
