"""Reading and writing: checkpoints (``ember.save`` / ``ember.load``)."""
