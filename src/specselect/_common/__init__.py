"""Cross-cutting pieces every layer may use, each concept once: atomic file I/O and canonical JSON
(`fileio`), the specselect home directory (`home`), secret detection and redaction (`secrets`) and the facts
of the host a run happens on (`hostfacts`). They import nothing of specselect but `errors`."""
