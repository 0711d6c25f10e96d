"""Package layout: the five top-level folders install as subpackages of one `privrec` package.

The folders keep the product's layout names (docs/architecture.md: `shared/`, `server/`, `client/`,
`adversary/`, `sim/`), and install as `privrec.shared`, `privrec.server`, … so that nothing
generic lands at the top level of site-packages. Everything else is in pyproject.toml.
"""

from setuptools import find_packages, setup

NODES = ("shared", "server", "client", "adversary", "sim")

setup(
    packages=["privrec"]
    + [
        f"privrec.{node}{'.' + sub if sub else ''}"
        for node in NODES
        for sub in ["", *find_packages(node)]
    ],
    package_dir={"privrec": "privrec", **{f"privrec.{node}": node for node in NODES}},
)
