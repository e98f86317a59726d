"""The records every layer shares: what crosses a layer or is written to disk, as pure pydantic models.

Just above `core` and below everything that produces or reads them (measure, engines, evidence, artifacts), so a
reader finds a result's type in one place and the layers that fill it in never import each other for it. Pure: no
I/O, processes or networking (import-linter forbids them, indirect imports included).
"""
