"""The compatibility corpus (issue 18): published kernels, read from installed packages."""
