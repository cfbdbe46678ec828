#!/usr/bin/env python3
"""Renders the report's index.html in headless Chromium: the page must draw without console errors
or script errors, and every plot area of the screenshot must hold a drawing (not blank).

Usage: browser_test.py --tierpack BIN --fixture BIN --out DIR
Writes DIR/<case>/report/ (the report) and DIR/<case>/index.png (the screenshot, a CI artifact).
Exits 77 (ctest: skipped) when Chromium is not installed (scripts/install-deps.sh --browser).
Standard library only.
"""
import argparse
import html
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

SKIP = 77
WIDTH = 1400
SHOT_HEIGHT = 4000  # enough for the test cases' pages; a taller page gets a second, taller screenshot

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--force-device-scale-factor=1", "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
]


def find_chromium():
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def chromium(binary, args, timeout=120):
    with tempfile.TemporaryDirectory(prefix="tierpack-chromium-") as profile:
        cmd = [binary] + CHROMIUM_FLAGS + ["--user-data-dir=" + profile] + args
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def console_lines(stderr):
    """Lines Chromium logs for the page's console (console.*, uncaught exceptions)."""
    return [l for l in stderr.splitlines() if ":CONSOLE" in l or "Uncaught" in l]


def read_png(path):
    """Decodes an 8-bit RGB/RGBA non-interlaced PNG into (width, height, channels, rows of bytes)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, width = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or color not in (2, 6) or interlace:
                raise ValueError("unsupported PNG (depth %d, color %d, interlace %d)" % (depth, color, interlace))
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    # "Up" rows (most of a screenshot) are added to the row above byte-wise, 8 bits per lane: done
    # on big integers with masks (even and odd bytes apart) instead of a Python loop per byte.
    even = int.from_bytes(b"\x00\xff" * (stride // 2) + (b"\xff" if stride % 2 else b""), "big")
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 0:
            rows.append(bytes(line))
            prev = line
            continue
        if f == 2:
            x, p = int.from_bytes(line, "big"), int.from_bytes(prev, "big")
            lo = ((x & even) + (p & even)) & even
            hi = (((x >> 8) & even) + ((p >> 8) & even)) & even
            line = bytearray((lo | (hi << 8)).to_bytes(stride + 1, "big")[-stride:])
            rows.append(bytes(line))
            prev = line
            continue
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, channels, rows


def ink(png, x, y, w, h):
    """Fraction of pixels in the rectangle that are not (near) white, and the number of colours."""
    width, height, ch, rows = png
    x0, y0, x1, y1 = max(x, 0), max(y, 0), min(x + w, width), min(y + h, height)
    if x1 <= x0 or y1 <= y0:
        return 0.0, 0
    inked, total, colours = 0, 0, set()
    for yy in range(y0, y1, 2):
        row = rows[yy]
        for xx in range(x0, x1, 2):
            r, g, b = row[xx * ch], row[xx * ch + 1], row[xx * ch + 2]
            total += 1
            if r < 235 or g < 235 or b < 235:
                inked += 1
                colours.add((r >> 4, g >> 4, b >> 4))
    return inked / max(total, 1), len(colours)


def check_case(name, args, opts, chromium_bin):
    failures = []
    case_dir = os.path.join(opts.out, name)
    inputs, report = os.path.join(case_dir, "inputs"), os.path.join(case_dir, "report")
    shutil.rmtree(case_dir, ignore_errors=True)
    os.makedirs(inputs)
    subprocess.run([opts.fixture, inputs] + args["fixture"], check=True, capture_output=True)
    cmd = [opts.tierpack, "report", os.path.join(inputs, "run.tpk"), "-o", report, "--quiet"]
    if args.get("plan"):
        cmd += ["--plan", os.path.join(inputs, "plan.json"), "--run-stats", os.path.join(inputs, "stats.json")]
    subprocess.run(cmd, check=True, capture_output=True)
    url = "file://" + os.path.abspath(os.path.join(report, "index.html"))

    # 1. One Chromium run: the page's script draws, the DOM it leaves and a screenshot come back.
    png_path = os.path.join(case_dir, "index.png")
    height = SHOT_HEIGHT
    dom_run = chromium(chromium_bin, ["--window-size=%d,%d" % (WIDTH, height), "--dump-dom", "--screenshot=" + png_path, url])
    for line in console_lines(dom_run.stderr):
        failures.append("%s: console: %s" % (name, line.strip()))
    body = re.search(r"<body([^>]*)>", dom_run.stdout)
    attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', body.group(1))) if body else {}
    if attrs.get("data-render") != "ok":
        failures.append("%s: page did not finish drawing (data-render=%r, errors=%s)" %
                        (name, attrs.get("data-render"), html.unescape(attrs.get("data-render-errors", ""))))
    plots = json.loads(html.unescape(attrs.get("data-plots", "[]")))
    if len(plots) < args["min_plots"]:
        failures.append("%s: %d plot areas drawn, expected at least %d" % (name, len(plots), args["min_plots"]))
    bottom = max([p["y"] + p["h"] for p in plots] + [0])

    # 2. Look into every plot area of the screenshot (taken again, taller, if a plot lies below it).
    if bottom > height:
        height = min(bottom + 200, 16000)
        shot = chromium(chromium_bin, ["--window-size=%d,%d" % (WIDTH, height), "--screenshot=" + png_path, url])
        for line in console_lines(shot.stderr):
            failures.append("%s: console (screenshot run): %s" % (name, line.strip()))
    if not os.path.exists(png_path):
        return failures + ["%s: no screenshot written: %s" % (name, dom_run.stderr[-500:])]
    png = read_png(png_path)
    for p in plots:
        frac, colours = ink(png, p["x"], p["y"], p["w"], p["h"])
        print("  %-10s %-28s %4dx%-5d ink %5.1f%%  colours %d" % (name, p["plot"], p["w"], p["h"], 100 * frac, colours))
        if p["w"] < 100 or p["h"] < 10:
            failures.append("%s: plot %s is tiny (%dx%d)" % (name, p["plot"], p["w"], p["h"]))
        elif frac < 0.01 or colours < 2:
            failures.append("%s: plot %s looks blank (ink %.2f%%, %d colours)" % (name, p["plot"], 100 * frac, colours))
    print("  %s: screenshot %s (%dx%d)" % (name, png_path, png[0], png[1]))
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tierpack", required=True)
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--out", required=True)
    opts = ap.parse_args()
    chromium_bin = find_chromium()
    if not chromium_bin:
        print("SKIP: chromium not installed (scripts/install-deps.sh --browser installs it)")
        return SKIP
    cases = {
        # GPU profile with plan and run statistics: 3 memory charts, lifetimes, 2 page maps, groups, migrations.
        "gpu-plan": {"fixture": ["--layers", "6"], "plan": True, "min_plots": 8},
        # Host-only profile, no plan: memory, lifetimes, host page map.
        "host": {"fixture": ["--layers", "10", "--host"], "plan": False, "min_plots": 3},
    }
    failures = []
    for name, args in cases.items():
        failures += check_case(name, args, opts, chromium_bin)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
