"""Adapters to systems that run cupyprep at scale, each imported only on demand:

- :mod:`cupyprep.integrations.ray`: callable classes for Ray Data's
  ``Dataset.map_batches`` (offline batch inference over many images on GPU actors).

The Triton Inference Server Python backend is an example model repository
(``examples/triton/``) rather than a module: Triton loads a ``model.py`` from its model
repository, and that file uses the public API only.

Nothing here is imported by ``import cupyprep``, and the adapters import neither Ray nor
Triton themselves: the classes are what those systems call.
"""
