"""The HTML report (--html) in a real browser: pages written on the sample corpus, opened in headless Chromium.

Runs from the repository root, on the shipped sample corpus (eval/docs, eval/goldset.csv; the index eval/index is
built on the first run):

  python eval_retrieval.py --mode dense --compare-to eval/baseline.json --html bench/out/report.html
  python eval_retrieval.py --ablation --html bench/out/ablation.html

(reports under eval/runs/, git-ignored), then opens each page in headless Chromium through the DevTools protocol
over --remote-debugging-pipe (Python's standard library only) and prints per page: its bytes, its SVGs, console
errors and exceptions, network requests other than the page's own file:// URL, and the wall time from navigation to
the load event with the load average. A screenshot of the compared run's page (1200 px wide) is saved to
--screenshot (default docs/report.png), shrunk with Pillow to at most --max-png bytes.

Chromium: `apt-get update && apt-get install -y chromium` (Debian/Ubuntu), or give its path with --chromium.
Exit status 1 when a page logs a console error or requests anything over the network.
"""
from __future__ import annotations

import argparse
import base64
import fcntl
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
RUNS = {"report.html": ["--mode", "dense", "--compare-to", "eval/baseline.json"], "ablation.html": ["--ablation"]}
WIDTH, HEIGHT = 1200, 1500  # the screenshot's viewport


class Pipe:
    """The DevTools protocol over Chromium's --remote-debugging-pipe: JSON messages ending in NUL, commands written
    to the browser's fd 3, replies and events read from its fd 4."""

    def __init__(self, command: list[str]) -> None:
        to_browser, self.write_end = os.pipe()
        self.read_end, from_browser = os.pipe()
        # Out of the way of 3 and 4 first, so that neither dup2 below overwrites the other's source.
        to_browser, from_browser = (high_fd(fd) for fd in (to_browser, from_browser))
        # The browser reads fd 3 and writes fd 4: dup the pipe ends onto those numbers in the child.
        self.process = subprocess.Popen(command, pass_fds=(3, 4), stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL,
                                        preexec_fn=lambda: (os.dup2(to_browser, 3), os.dup2(from_browser, 4)))
        os.close(to_browser)
        os.close(from_browser)
        self.buffer, self.next_id, self.events = b"", 0, []

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """Send a command and wait for its reply; events read meanwhile are kept in `events`."""
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.write_end, json.dumps(message).encode() + b"\0")
        while True:
            reply = self.read()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def read(self) -> dict:
        while b"\0" not in self.buffer:
            chunk = os.read(self.read_end, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def wait_for(self, method: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(event.get("method") == method for event in self.events):
            if time.monotonic() > deadline:
                raise RuntimeError(f"no {method} within {timeout:g} s")
            self.events.append(self.read())

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except RuntimeError:
            pass
        self.process.wait(timeout=30)


def high_fd(fd: int) -> int:
    """`fd` moved to a number of 100 or more (the old one closed)."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 100)
    os.close(fd)
    return moved


def find_chromium(given: str | None) -> str:
    for name in ([given] if given else ["chromium", "chromium-browser", "google-chrome"]):
        path = shutil.which(name) if name else None
        if path:
            return path
    sys.exit("error: Chromium not found; install it with `apt-get update && apt-get install -y chromium` or give "
             "--chromium PATH")


def open_page(chromium: str, page: Path, screenshot: bool) -> dict:
    """Open `page` in a fresh headless Chromium: its console errors, network requests, SVG count, load time and,
    when asked, a PNG screenshot (bytes)."""
    with tempfile.TemporaryDirectory() as profile:
        pipe = Pipe([chromium, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                     "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
                     f"--window-size={WIDTH},{HEIGHT}", "about:blank"])
        try:
            target = pipe.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                pipe.send(f"{domain}.enable", session=session)
            pipe.send("Emulation.setDeviceMetricsOverride", {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1,
                                                             "mobile": False}, session=session)
            pipe.send("Emulation.setScrollbarsHidden", {"hidden": True}, session=session)
            pipe.events.clear()
            url = page.resolve().as_uri()
            started = time.perf_counter()
            pipe.send("Page.navigate", {"url": url}, session=session)
            pipe.wait_for("Page.loadEventFired")
            seconds = time.perf_counter() - started
            svgs = pipe.send("Runtime.evaluate", {"expression": "document.querySelectorAll('svg').length",
                                                  "returnByValue": True}, session=session)["result"]["value"]
            png = base64.b64decode(pipe.send("Page.captureScreenshot", {"format": "png"}, session=session)["data"]) \
                if screenshot else b""
        finally:
            pipe.close()
    errors, requests = [], []
    for event in pipe.events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            errors.append(params["exceptionDetails"].get("text", "exception"))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            errors.append(params["entry"].get("text", ""))
        elif method == "Network.requestWillBeSent" and params["request"]["url"] != url:
            requests.append(params["request"]["url"])
    return {"errors": errors, "requests": requests, "svgs": svgs, "seconds": seconds, "png": png}


def small_png(png: bytes, limit: int) -> bytes:
    """The screenshot optimised (Pillow), then reduced to a 256-colour palette if it is still over `limit` bytes."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    if out.tell() > limit:
        out = io.BytesIO()
        image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(out, format="PNG", optimize=True)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chromium", default=None, help="the browser (default: chromium on PATH)")
    parser.add_argument("--screenshot", default=str(ROOT / "docs" / "report.png"),
                        help="where the compared run's screenshot goes (default: docs/report.png)")
    parser.add_argument("--max-png", type=int, default=250_000, help="bytes the screenshot may take (default: "
                                                                     "250000)")
    parser.add_argument("--skip-eval", action="store_true", help="open the pages written by an earlier run")
    args = parser.parse_args(argv)
    chromium = find_chromium(args.chromium)
    OUT.mkdir(parents=True, exist_ok=True)
    if not args.skip_eval:
        for name, flags in RUNS.items():
            command = [sys.executable, "eval_retrieval.py", *flags, "--quiet", "--html", str(OUT / name)]
            print("$ " + " ".join(command[1:]), file=sys.stderr)
            done = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL)
            if done.returncode not in (0, 1):  # 1: evaluated, a gate failed or the run is degraded
                sys.exit(f"error: {' '.join(command[1:])} exited {done.returncode}")
    version = subprocess.run([chromium, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"{version}; load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'page':<16}{'bytes':>9}{'SVGs':>6}{'console errors':>16}{'requests':>10}{'load s':>8}")
    failed = False
    for name in RUNS:
        found = open_page(chromium, OUT / name, screenshot=name == "report.html")
        print(f"{name:<16}{(OUT / name).stat().st_size:>9,}{found['svgs']:>6}{len(found['errors']):>16}"
              f"{len(found['requests']):>10}{found['seconds']:>8.2f}")
        for line in found["errors"] + [f"request: {url}" for url in found["requests"]]:
            print(f"  {line}")
        failed = failed or bool(found["errors"] or found["requests"])
        if found["png"]:
            png = small_png(found["png"], args.max_png)
            Path(args.screenshot).parent.mkdir(parents=True, exist_ok=True)
            Path(args.screenshot).write_bytes(png)
            print(f"  screenshot {WIDTH}x{HEIGHT}: {args.screenshot} ({len(png):,} bytes)")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
