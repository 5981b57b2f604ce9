"""A griffe extension: the core's reStructuredText-ish docstrings as Markdown for mkdocstrings.

The docstrings use roles (:class:`~zeus_core.X`), double backticks and ``Example::``
blocks; ``zeus_core.docgen.markdown`` is the one conversion, the same the generated
hook docs use.
"""

from __future__ import annotations

from typing import Any

import griffe

from zeus_core.docgen import markdown


class RstDocstrings(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
