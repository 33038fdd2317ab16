"""The workflow engine: workers, live bodies, replay on a miss, step execution.

Internal: the public names are re-exported by :mod:`querator.workflows`.
"""
