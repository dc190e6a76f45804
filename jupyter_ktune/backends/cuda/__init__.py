"""The ``--backend cuda`` package: CUDA C++ cells, NVRTC (CuPy) to run, nvcc for the report.

:mod:`.source` reads the cell as C++, :mod:`.launch` binds and launches a variant,
:mod:`.timer` times it (CuPy events, a read-only L2 flush), :mod:`.profile` traces its KT_SCOPE
scopes; :mod:`.backend` puts them behind the protocol of :mod:`jupyter_ktune.backends.base`.
Nothing is imported here, so that ``python -m`` of a submodule runs it once; CuPy is imported
in the worker only.
"""
