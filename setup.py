"""Build of the C extensions (row decoder, snapshot row reader, canal-json renderer); everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "sparkcdc.capture._rowdecode",
            sources=["src/sparkcdc/capture/_rowdecode.c"],
            extra_compile_args=["-O2", "-Wall"],
        ),
        Extension(
            "sparkcdc.capture._textrows",
            sources=["src/sparkcdc/capture/_textrows.c"],
            extra_compile_args=["-O2", "-Wall"],
        ),
        Extension(
            "sparkcdc.codec._canaljson",
            sources=["src/sparkcdc/codec/_canaljson.c"],
            extra_compile_args=["-O2", "-Wall"],
        ),
    ]
)
