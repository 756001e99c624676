"""The vocabulary the lesson modules use to describe their exercises and questions."""

from ..exercise import ByHand, Method, Prediction

__all__ = ["ByHand", "Method", "Prediction"]
