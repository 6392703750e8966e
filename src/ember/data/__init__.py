"""Datasets, data loaders and transforms (``ember.data``)."""
