"""Sagas: the ``@saga`` decorator, the compensation plan and its phase.

Internal: the public names are re-exported by :mod:`querator.workflows`
(``querator.workflows.saga`` is the decorator; hence this package is ``sagas``).
"""
