"""specselect.report: renderers that only read result documents (terminal tables, report.html, report.md)."""

from specselect.report.build import write_reports

__all__ = ["write_reports"]
