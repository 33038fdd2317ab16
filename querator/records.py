"""Moved to :mod:`querator.model_bases`; kept for the branches merged after."""

from querator.model_bases import InputModel, StoredModel, View, validation_message

__all__ = ["InputModel", "StoredModel", "View", "validation_message"]
