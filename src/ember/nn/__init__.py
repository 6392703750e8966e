"""Neural-network layers (``ember.nn``) and their functional forms (``ember.nn.functional``)."""

from . import functional
