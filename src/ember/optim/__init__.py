"""Optimizers (``ember.optim``) and learning-rate schedulers (``ember.optim.lr_scheduler``)."""
