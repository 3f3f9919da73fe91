"""Build of the C row decoder; everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "sparkcdc.capture._rowdecode",
            sources=["src/sparkcdc/capture/_rowdecode.c"],
            extra_compile_args=["-O2", "-Wall"],
        )
    ]
)
