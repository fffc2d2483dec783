"""Retrieval strategies behind one interface, the registry that names them, and the LM and
retriever interfaces (with their backends) that they call."""

from flarebench.strategies.base import Strategy
from flarebench.strategies.registry import expand, get, names, parse_spec, register

__all__ = ["Strategy", "expand", "get", "names", "parse_spec", "register"]
