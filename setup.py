"""The one thing pyproject.toml cannot say without an experimental-feature warning on
every install: the C extension (`[tool.setuptools] ext-modules` is still experimental).

`app.index._vector` holds the hot loops of the append's search vector
(app/index/vector.py says which). It is optional: where no C compiler is found
the package installs without it and vector.py makes the same vector in Python,
slower. The container image builds it (Dockerfile).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("app.index._vector", sources=["app/index/_vector.c"], optional=True)])
