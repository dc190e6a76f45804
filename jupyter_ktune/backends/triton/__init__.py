"""The ``--backend triton`` package: ``@triton.jit`` cells on a GPU or Triton's interpreter.

:mod:`.cell` reads the cell (notebook side), :mod:`.module` loads it in the worker,
:mod:`.launch` binds and launches it, :mod:`.timer` times it, :mod:`.static` compiles it ahead
of time for the report, :mod:`.profile` traces its Proton scopes; :mod:`.backend` puts them
behind the protocol of :mod:`jupyter_ktune.backends.base`. Nothing is imported here, so that
``python -m`` of a submodule (the AOT compile child) runs it once; triton itself is imported in
the worker only, after the interpreter is chosen.
"""
