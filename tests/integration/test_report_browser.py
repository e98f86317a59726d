"""`specselect report` on a real (small) run, loaded in headless Debian Chromium over the DevTools protocol.

The shared recorded run on the real CPU vLLM (the `recorded_run` fixture: baseline + n-gram + the target as its
own draft + a candidate refused at admission + a candidate whose launch fails) has its report rendered again,
and the page is loaded at 1366x768: no console error, no exception, no request leaving the file system, no
horizontal scrolling, and a screenshot that is not blank. The browser is the distribution's package
(`apt-get install -y chromium`); the test skips without it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import signal
import struct
import subprocess
import time
import zlib
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from _reduced_plan import RecordedRun, specselect

from specselect._artifacts.layout import RunLayout
from specselect._report.console import report_decision_rows
from specselect._report.data import load_report_data

pytestmark = pytest.mark.integration

CHROMIUM_INSTALL = "apt-get update && apt-get install -y chromium"


# ---- PNG check (pure Python: zlib + the five PNG row filters) ------------------------------------------


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB/RGBA bytes) of an 8-bit, non-interlaced truecolour PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up = prev[i]
            corner = prev[i - bpp] if i >= bpp else 0
            pred = (0, left, up, (left + up) // 2, _paeth(left, up, corner))[kind]
            line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, rows


def png_stats(data: bytes) -> tuple[int, int, int, float]:
    """(width, height, distinct colours, share of non-white pixels) over every 2nd pixel of every 2nd row."""
    width, height, rows = decode_png(data)
    bpp = len(rows[0]) // width
    colours: set[bytes] = set()
    ink = total = 0
    for row in rows[::2]:
        for x in range(0, width, 2):
            px = row[x * bpp : x * bpp + 3]
            colours.add(px)
            total += 1
            ink += px != b"\xff\xff\xff"
    return width, height, len(colours), ink / max(total, 1)


def test_png_decoder_reads_a_known_image() -> None:
    # 2x2 RGB: red, green / blue, white, rows filtered with None and Sub.
    rows = b"\x00" + bytes([255, 0, 0, 0, 255, 0]) + b"\x01" + bytes([0, 0, 255, 255, 255, 0])
    ihdr = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    assert decode_png(png)[2] == [bytes([255, 0, 0, 0, 255, 0]), bytes([0, 0, 255, 255, 255, 255])]


# ---- headless Chromium over the DevTools protocol ------------------------------------------------------


class PageLoad:
    """What loading one page showed: console/log errors, non-file requests, layout facts, two screenshots."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.layout: dict[str, Any] = {}
        self.viewport_png = b""
        self.full_png = b""


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


_LAYOUT_PROBE = (
    "JSON.stringify({scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,"
    " scrollHeight: document.documentElement.scrollHeight, charts: document.querySelectorAll('svg.chart')"
    ".length, firstSection: document.querySelector('main section').id, scripts: "
    "document.scripts.length, title: document.title})"
)


def _page_error(method: str | None, params: dict[str, Any]) -> str | None:
    """The error a DevTools event reports, if it is one."""
    if method == "Runtime.exceptionThrown":
        return f"exception: {params['exceptionDetails'].get('text')}"
    if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
        return f"console.{params['type']}: {params.get('args')}"
    if method == "Log.entryAdded" and params["entry"].get("level") == "error":
        return f"log: {params['entry'].get('text')} ({params['entry'].get('url')})"
    return None


class _DevtoolsPage:
    """One page over the DevTools protocol: commands answered by id, events recorded into `out` meanwhile."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.out = PageLoad()
        self.loaded = asyncio.Event()
        self._ids = iter(range(1, 10_000))

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        my_id = next(self._ids)
        await self.ws.send_json({"id": my_id, "method": method, "params": params})
        while True:
            msg = await asyncio.wait_for(self.ws.receive_json(), timeout=60)
            if msg.get("id") == my_id:
                assert "error" not in msg, msg
                return dict(msg.get("result", {}))
            self.handle(msg)

    def handle(self, msg: dict[str, Any]) -> None:
        method, params = msg.get("method"), msg.get("params", {})
        error = _page_error(method, params)
        if error is not None:
            self.out.errors.append(error)
        elif method == "Page.loadEventFired":
            self.loaded.set()
        elif method == "Network.requestWillBeSent" and not params["request"]["url"].startswith(("file:", "data:")):
            self.out.requests.append(params["request"]["url"])

    async def load(self, url: str, width: int, height: int) -> None:
        for domain in ("Runtime", "Log", "Page", "Network"):
            await self.call(f"{domain}.enable")
        await self.call(
            "Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False
        )
        await self.call("Page.navigate", url=url)
        deadline = time.monotonic() + 60
        while not self.loaded.is_set() and time.monotonic() < deadline:
            self.handle(await asyncio.wait_for(self.ws.receive_json(), timeout=60))
        assert self.loaded.is_set(), "the page never fired its load event"

    async def capture(self, width: int) -> None:
        result = await self.call("Runtime.evaluate", expression=_LAYOUT_PROBE, returnByValue=True)
        self.out.layout = json.loads(result["result"]["value"])
        shot = await self.call("Page.captureScreenshot", format="png")
        self.out.viewport_png = base64.b64decode(shot["data"])
        full_height = min(int(self.out.layout["scrollHeight"]), 16000)
        clip = {"x": 0, "y": 0, "width": width, "height": full_height, "scale": 1}
        shot = await self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip)
        self.out.full_png = base64.b64decode(shot["data"])

    async def drain(self) -> None:
        await asyncio.sleep(0.3)  # late console messages (none expected) still arrive before we stop
        while True:
            try:
                self.handle(await asyncio.wait_for(self.ws.receive_json(), timeout=0.3))
            except TimeoutError:
                return


async def _devtools(port: int, url: str, width: int, height: int) -> PageLoad:
    async with aiohttp.ClientSession() as http:
        async with http.put(f"http://127.0.0.1:{port}/json/new?about:blank") as resp:
            target = await resp.json(content_type=None)
        async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            page = _DevtoolsPage(ws)
            await page.load(url, width, height)
            await page.capture(width)
            await page.drain()
    return page.out


def load_in_chromium(page: Path, profile: Path, width: int = 1366, height: int = 768) -> PageLoad:
    """Open `page` in a fresh headless Chromium profile and report what happened."""
    exe = _chromium()
    assert exe is not None
    args = [
        exe,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--no-default-browser-check",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        "--remote-debugging-port=0",
        f"--window-size={width},{height}",
        "about:blank",
    ]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        active = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (active.exists() and active.read_text().strip()) and time.monotonic() < deadline:
            assert proc.poll() is None, f"chromium exited with {proc.returncode}"
            time.sleep(0.1)
        port = int(active.read_text().split()[0])
        return asyncio.run(_devtools(port, page.resolve().as_uri(), width, height))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)


def _md_cells(line: str) -> list[str]:
    cells, cur, escaped = [], "", False
    for ch in line.strip()[1:-1]:
        if escaped:
            cur += ch
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "|":
            cells.append(cur.strip())
            cur = ""
        else:
            cur += ch
    cells.append(cur.strip())
    return [c.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&") for c in cells]


@pytest.mark.skipif(_chromium() is None, reason=f"headless Chromium is not installed (CI: {CHROMIUM_INSTALL})")
def test_report_of_a_real_run_loads_cleanly_in_chromium(recorded_run: RecordedRun, tmp_path: Path) -> None:
    assert recorded_run.done.returncode == 0, recorded_run.done.stderr[-3000:]
    layout = RunLayout(recorded_run.root)

    report = specselect("report", str(layout.root), "--json", cwd=tmp_path, timeout=120)
    assert report.returncode == 0, report.stderr[-3000:]
    paths = json.loads(report.stdout)
    assert Path(paths["html"]) == layout.report_html and layout.report_md.exists()

    # The Markdown carries the same decision table as the HTML, cell for cell.
    data = load_report_data(layout.root)
    assert data.evidence is not None
    # The one note: the target as its own draft halves the KV cache (its layers take as many blocks as the
    # target's); n-gram costs none, so it has no line.
    (note,) = data.notes
    assert note.startswith("g2_draft holds ") and "(50.0%) fewer than g0_target_only" in note, note
    expected = report_decision_rows(data.evidence, data.groups)
    md_lines = layout.report_md.read_text().splitlines()
    start = next(i for i, line in enumerate(md_lines) if line.startswith("| group | scenario |"))
    md_rows = [_md_cells(line) for line in md_lines[start + 2 : start + 2 + len(expected)]]
    assert md_rows == expected
    statuses = {row[0]: row[2] for row in expected}
    assert statuses == {
        "g1_ngram": "completed",
        "g2_draft": "completed",
        "g3_eagle3": "asset_missing",
        "g9_broken": "failed",
    }
    html_text = layout.report_html.read_text()
    assert "<script" not in html_text and "http://" not in html_text.split("<main", 1)[0]

    page = load_in_chromium(layout.report_html, tmp_path / "profile")
    (tmp_path / "report-1366x768.png").write_bytes(page.viewport_png)
    (tmp_path / "report-full.png").write_bytes(page.full_png)
    keep = os.environ.get("SPECSELECT_REPORT_SCREENSHOTS")
    if keep:  # for looking at the page by eye: SPECSELECT_REPORT_SCREENSHOTS=/some/dir
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(layout.report_html, Path(keep) / "report.html")
        shutil.copy(tmp_path / "report-1366x768.png", Path(keep))
        shutil.copy(tmp_path / "report-full.png", Path(keep))

    assert page.errors == []
    assert page.requests == []
    assert page.layout["scripts"] == 0
    assert page.layout["firstSection"] == "decisions"
    assert page.layout["charts"] >= 4  # speedup, TTFT/TPOT/E2E, acceptance, prediction
    assert page.layout["scrollWidth"] <= page.layout["innerWidth"], page.layout  # no sideways scrolling at 1366
    width, height, colours, ink = png_stats(page.viewport_png)
    assert (width, height) == (1366, 768)
    assert colours > 50 and 0.03 < ink < 0.97, (colours, ink)
    width, height, colours, ink = png_stats(page.full_png)
    assert height > 2000 and colours > 100, (height, colours)
