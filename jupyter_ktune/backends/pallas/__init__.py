"""The ``--backend pallas`` package: Python cells that build a Pallas kernel (JAX).

:mod:`.cell` reads and loads the cell and picks its lowering, :mod:`.launch` binds and calls a
variant, :mod:`.timing` times it (CUPTI on a GPU, the host clock otherwise) and sizes its
programs, :mod:`.profile` traces Mosaic GPU scopes; :mod:`.backend` puts them behind the
protocol of :mod:`jupyter_ktune.backends.base` (its docstring has the cell contract). Nothing is
imported here; JAX is imported in the worker only.
"""
