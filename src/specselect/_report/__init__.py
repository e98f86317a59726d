"""specselect._report: renderers that only read result documents (terminal tables, report.html, report.md)."""

from specselect._report.write import write_reports

__all__ = ["write_reports"]
