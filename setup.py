"""The compiled kernels (``engine/kernels/_*.pyx``), built by the package's own build.

Everything else about the package is in ``pyproject.toml``; setuptools reads this file only for
the extension modules. ``-O3`` (and ``-g0``) but no ``-march=native``: a wheel built here must
run on any x86-64 (or aarch64) machine.
"""

from __future__ import annotations

import os
import shlex

from Cython.Build import cythonize
from setuptools import Extension, setup

# -g0: no debug info in wheels; WEIR_KERNEL_CFLAGS replaces the flags (say "-O0 -g" to step
# through a kernel in gdb, or a quick -O0 build where only the package's contents matter)
CFLAGS = shlex.split(os.environ.get("WEIR_KERNEL_CFLAGS", "-O3 -g0"))
KERNELS = ("_scan", "_timek", "_intern", "_fold", "_strk", "_recs", "_cellk", "_kbatch")
# the package's folders are symlinked under weir/ (pyproject.toml), so the modules' names are
# weir.engine.kernels.* and their sources are reached through weir/engine
extensions = [
    Extension(
        f"weir.engine.kernels.{name}",
        [f"weir/engine/kernels/{name}.pyx"],
        include_dirs=["weir/engine/kernels"],
        extra_compile_args=CFLAGS,
    )
    for name in KERNELS
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives={"language_level": "3"},
        quiet=True,
        nthreads=os.cpu_count() or 1,
    ),
    # the modules compile independently: one gcc per core (a cold build is most of make venv)
    options={"build_ext": {"parallel": os.cpu_count() or 1}},
)
