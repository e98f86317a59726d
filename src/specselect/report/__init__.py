"""specselect.report: renderers that only read result documents (terminal tables, report.html, report.md)."""

from specselect.report.write import write_reports

__all__ = ["write_reports"]
