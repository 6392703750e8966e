"""Tools that read graphs: drawings and the interactive viewer (viz.py)."""
