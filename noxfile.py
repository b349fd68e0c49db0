"""nox sessions mirroring CI: `nox -s lint types tests`."""

import nox

nox.options.default_venv_backend = "venv"


@nox.session
def tests(session: nox.Session) -> None:
    session.install("torch==2.13.0")  # CPU wheel first; see README
    session.install("-e", ".[dev,all]")
    session.run("pytest", "-n", "2", *session.posargs)


@nox.session
def heavy(session: nox.Session) -> None:
    """The whole suite, the tests marked heavy included."""
    session.install("torch==2.13.0")
    session.install("-e", ".[dev,all]")
    session.run("pytest", "-n", "2", "--heavy", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def types(session: nox.Session) -> None:
    """mypy on the package, with the libraries it reads types from (pyproject.toml's [tool.mypy])."""
    session.install("torch==2.13.0")
    session.install("-e", ".[dev,all]")
    session.run("mypy")
