"""The one packaging fact ``pyproject.toml`` cannot state: the repository's top-level ``conf/`` and ``data/``
folders ship inside the package, as ``respect_jax/conf`` and ``respect_jax/data`` (their files are listed in
``[tool.setuptools.package-data]``; ``respect_jax.resources`` finds them). Everything else is in pyproject.toml.
"""

import warnings

from setuptools import find_namespace_packages, setup

# their sub-folders (conf/hardware/, data/models/, ...) hold data files, not Python packages
warnings.filterwarnings("ignore", message=r"Package 'respect_jax\.(conf|data)\..*' is absent from the `packages`")

SHIPPED = {"respect_jax.conf": "conf", "respect_jax.data": "data"}

setup(
    packages=[*find_namespace_packages(include=["respect_jax", "respect_jax.*"], exclude=["*.__pycache__"]), *SHIPPED],
    package_dir=SHIPPED,
)
