#!/usr/bin/env python3
"""Screenshot the Dask dashboard once Bokeh has drawn the task stream.

Chromium's one-shot ``--screenshot`` flag captures the page before Bokeh has rendered it, so
this drives headless Chromium over the Chrome DevTools Protocol (CDP) instead: navigate, poll
the page until the task-stream plot has drawn coloured task rectangles, then capture. CDP runs
over Chromium's ``--remote-debugging-pipe`` (:func:`chromium_page`, standard library only);
:func:`launch_chromium` and :class:`CDPSession` drive a DevTools port over a websocket instead
(PyPI ``websocket-client``).

Usage:
    python3 cluster/dashboard_screenshot.py http://127.0.0.1:8787/status out.png
    python3 cluster/dashboard_screenshot.py --demo docs/dashboard.png   # the demo export

Needs the Debian package ``chromium`` (or set ``GUIDELOOM_CHROMIUM`` to a Chrome binary).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-proxy-server",
    "--hide-scrollbars",
)

# Evaluated in the page. Returns a small status object; ``drawn`` is true once
#  1. Bokeh has loaded a document holding the dashboard's figure named "task_stream",
#  2. its data source holds at least ``minTasks`` real tasks (the figure starts with one
#     invisible placeholder row named "start"),
#  3. Bokeh reports the plot view as finished rendering, and
#  4. the plot's canvas really has coloured (task) pixels: at least ``minFraction`` of the
#     sampled pixels are saturated, whereas background, grid, axes and text are grey.
# Should a future Bokeh rename its view API, step 3/4 fall back to every canvas on the page,
# including those inside Bokeh's shadow roots.
_DRAWN_JS = r"""
((minTasks, minFraction) => {
  const out = {bokeh: false, tasks: 0, finished: false, fraction: 0, drawn: false};
  if (!window.Bokeh || !Bokeh.documents || Bokeh.documents.length === 0) return out;
  out.bokeh = true;
  let model = null;
  for (const doc of Bokeh.documents) {
    model = doc.get_model_by_name("task_stream");
    if (model) break;
  }
  if (!model) return out;
  for (const r of model.renderers || []) {
    const names = r.data_source && r.data_source.data && r.data_source.data.name;
    if (names) out.tasks += Array.from(names).filter((n) => n !== "start").length;
  }
  const coloured = (canvas) => {
    if (!canvas || !canvas.width || !canvas.height) return 0;
    const px = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
    const step = 4 * 3;  // sample every third pixel
    let hit = 0, seen = 0;
    for (let i = 0; i < px.length; i += step) {
      seen++;
      const mx = Math.max(px[i], px[i + 1], px[i + 2]);
      const mn = Math.min(px[i], px[i + 1], px[i + 2]);
      if (px[i + 3] > 200 && mx - mn > 40) hit++;
    }
    return seen ? hit / seen : 0;
  };
  let view = null;
  try { view = Bokeh.index.find_one(model); } catch (e) { view = null; }
  if (view && view.canvas_view && view.canvas_view.primary) {
    out.finished = typeof view.has_finished === "function" ? view.has_finished() : true;
    out.fraction = coloured(view.canvas_view.primary.canvas);
  } else {
    out.finished = Bokeh.documents.every((d) => d.is_idle !== false);
    const canvases = [];
    const walk = (root) => {
      root.querySelectorAll("*").forEach((el) => {
        if (el.tagName === "CANVAS") canvases.push(el);
        if (el.shadowRoot) walk(el.shadowRoot);
      });
    };
    walk(document);
    out.fraction = Math.max(0, ...canvases.map(coloured));
  }
  out.drawn = out.tasks >= minTasks && out.finished && out.fraction >= minFraction;
  return out;
})(%d, %f)
"""


class ChromiumNotFoundError(FileNotFoundError):
    """No Chromium or Chrome binary was found."""


def find_chromium() -> str | None:
    """Return the Chromium binary: ``$GUIDELOOM_CHROMIUM`` or the first one on ``PATH``."""
    explicit = os.environ.get("GUIDELOOM_CHROMIUM")
    if explicit:
        return explicit if shutil.which(explicit) else None
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _poll(condition: Any, timeout: float, what: str, interval: float = 0.1) -> Any:
    """Call ``condition()`` until it returns something truthy, or raise ``TimeoutError``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)  # polling interval between checks of the condition


_LOCAL_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy


@contextlib.contextmanager
def launch_chromium(
    width: int = 1400, height: int = 900, timeout: float = 30.0, binary: str | None = None
) -> Iterator[int]:
    """Run headless Chromium with remote debugging on 127.0.0.1; yield its DevTools port.

    The browser gets a fresh temporary profile, is started in its own process group, and that
    group is terminated (then killed) on exit.

    Args:
        width: Window width in CSS pixels.
        height: Window height in CSS pixels.
        timeout: Seconds to wait for the DevTools port.
        binary: Chromium executable; found with :func:`find_chromium` when ``None``.
    """
    exe = binary or find_chromium()
    if exe is None:
        raise ChromiumNotFoundError(
            "no Chromium found: install the Debian package 'chromium' or set GUIDELOOM_CHROMIUM"
        )
    profile = Path(tempfile.mkdtemp(prefix="guideloom-chromium-"))
    argv = [
        exe,
        *CHROMIUM_FLAGS,
        f"--user-data-dir={profile}",
        "--remote-debugging-address=127.0.0.1",
        "--remote-debugging-port=0",
        f"--window-size={width},{height}",
        "about:blank",
    ]
    log = open(profile.parent / f"{profile.name}.log", "wb")  # noqa: SIM115 - closed in the finally below
    proc = subprocess.Popen(  # argv is built here; no shell
        argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    browser = psutil.Process(proc.pid)
    try:
        port_file = profile / "DevToolsActivePort"

        def read_port() -> int | None:
            if proc.poll() is not None:
                log.flush()
                tail = Path(log.name).read_text(errors="replace")[-2000:]
                raise RuntimeError(f"chromium exited with code {proc.returncode}:\n{tail}")
            try:
                first = port_file.read_text().splitlines()[0]
            except (OSError, IndexError):
                return None
            return int(first) if first.strip().isdigit() else None

        yield _poll(read_port, timeout, "Chromium's DevToolsActivePort file")
    finally:
        _stop_browser(proc, browser)
        log.close()
        shutil.rmtree(profile, ignore_errors=True)
        Path(log.name).unlink(missing_ok=True)


class CDPSession:
    """A minimal synchronous CDP client for one page target (over ``websocket-client``)."""

    def __init__(self, ws_url: str, timeout: float = 30.0) -> None:
        import websocket  # PyPI package "websocket-client"

        # Chromium refuses DevTools websockets that send an Origin header it was not told to
        # allow, so send none.
        self._ws = websocket.create_connection(ws_url, timeout=timeout, suppress_origin=True)
        self._ids = itertools.count(1)

    @classmethod
    def for_first_page(cls, port: int, timeout: float = 30.0) -> CDPSession:
        """Connect to the first page target of the browser listening on ``port``."""

        def page_url() -> str | None:
            with _LOCAL_HTTP.open(f"http://127.0.0.1:{port}/json/list", timeout=timeout) as r:
                targets = json.load(r)
            pages = [t for t in targets if t.get("type") == "page"]
            return pages[0]["webSocketDebuggerUrl"] if pages else None

        return cls(_poll(page_url, timeout, "a page target"), timeout=timeout)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send a command and return its ``result``; events in between are ignored.

        Raises:
            RuntimeError: The browser answered with an error.
        """
        msg_id = next(self._ids)
        self._ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            reply = json.loads(self._ws.recv())
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise RuntimeError(f"CDP {method} failed: {reply['error']}")
                return reply.get("result", {})

    def evaluate(self, expression: str) -> Any:
        """Evaluate JavaScript in the page and return its JSON value (``None`` on exception)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            return None
        return result.get("result", {}).get("value")

    def close(self) -> None:
        """Close the websocket."""
        self._ws.close()


class PipeCDPSession:
    """CDP over Chromium's ``--remote-debugging-pipe`` (no websocket package needed).

    Commands go to one page target, attached in flat mode; see :func:`chromium_page`.
    """

    def __init__(self, to_browser: int, from_browser: int, timeout: float = 30.0) -> None:
        self._out, self._in = to_browser, from_browser
        self._timeout = timeout
        self._buffer = b""
        self._ids = itertools.count(1)
        self._session: str | None = None

    def _send(self, method: str, params: dict[str, Any], session: str | None) -> int:
        msg_id = next(self._ids)
        message: dict[str, Any] = {"id": msg_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._out, data):]
        return msg_id

    def _receive(self) -> dict[str, Any]:
        import select

        deadline = time.monotonic() + self._timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise TimeoutError(f"no answer from Chromium within {self._timeout} s")
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def _command(self, method: str, params: dict[str, Any], session: str | None) -> Any:
        msg_id = self._send(method, params, session)
        while True:
            reply = self._receive()
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise RuntimeError(f"CDP {method} failed: {reply['error']}")
                return reply.get("result", {})

    def open_page(self) -> None:
        """Create a blank page target and send later commands to it."""
        target = self._command("Target.createTarget", {"url": "about:blank"}, None)
        attached = self._command("Target.attachToTarget",
                                 {"targetId": target["targetId"], "flatten": True}, None)
        self._session = attached["sessionId"]

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send a command to the page and return its ``result`` (events are ignored)."""
        return self._command(method, params, self._session)

    def evaluate(self, expression: str) -> Any:
        """Evaluate JavaScript in the page and return its JSON value (``None`` on exception)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            return None
        return result.get("result", {}).get("value")

    def close(self) -> None:
        """Close the pipes (Chromium then exits)."""
        for fd in (self._out, self._in):
            with contextlib.suppress(OSError):
                os.close(fd)


# Chromium's --remote-debugging-pipe reads commands on fd 3 and answers on fd 4: this fixed
# program (no input reaches it as code) moves the two pipe ends there, then becomes Chromium.
_ON_FDS_3_AND_4 = ("import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); "
                   "os.execv(sys.argv[3], sys.argv[3:])")


@contextlib.contextmanager
def chromium_page(width: int = 1400, height: int = 900, timeout: float = 30.0,
                  binary: str | None = None) -> Iterator[PipeCDPSession]:
    """Headless Chromium driven over a pipe; yields a session on one page of that size.

    The browser gets a fresh temporary profile and its own process group, which is ended on
    exit (like :func:`launch_chromium`, without a DevTools port or websocket).
    """
    exe = binary or find_chromium()
    if exe is None:
        raise ChromiumNotFoundError(
            "no Chromium found: install the Debian package 'chromium' or set GUIDELOOM_CHROMIUM"
        )
    profile = Path(tempfile.mkdtemp(prefix="guideloom-chromium-"))
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()

    argv = [sys.executable, "-c", _ON_FDS_3_AND_4, str(to_child_r), str(from_child_w),
            exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe",
            f"--window-size={width},{height}", "about:blank"]
    proc = subprocess.Popen(  # argv is built here; no shell
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, pass_fds=(to_child_r, from_child_w))
    os.close(to_child_r)
    os.close(from_child_w)
    browser = psutil.Process(proc.pid)
    session = PipeCDPSession(to_child_w, from_child_r, timeout=timeout)
    try:
        session.open_page()
        session.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                     deviceScaleFactor=1, mobile=False)
        yield session
    finally:
        session.close()
        _stop_browser(proc, browser)
        shutil.rmtree(profile, ignore_errors=True)


# Evaluated in the page: the text a person sees, including Bokeh's shadow roots (its Div
# models render their HTML there, where ``--dump-dom`` does not look).
PAGE_TEXT_JS = r"""
(() => {
  const parts = [];
  const walk = (root) => {
    for (const el of root.querySelectorAll("*")) {
      if (!el.shadowRoot) continue;
      for (const child of el.shadowRoot.children) {
        if (child.tagName !== "STYLE" && child.tagName !== "LINK") parts.push(child.innerText);
      }
      walk(el.shadowRoot);
    }
  };
  parts.push(document.body ? document.body.innerText : "");
  walk(document);
  return parts.join("\n");
})()
"""


def page_text(session: PipeCDPSession | CDPSession) -> str:
    """All text on the page, shadow roots included."""
    return str(session.evaluate(PAGE_TEXT_JS) or "")


def open_and_read(session: PipeCDPSession | CDPSession, url: str, until: Any,
                  timeout: float = 30.0) -> str:
    """Navigate to ``url`` and return the page's text once ``until(text)`` holds.

    Raises:
        TimeoutError: It did not within ``timeout``; the message ends with the last text.
    """
    session.call("Page.navigate", url=url)
    last = ""

    def ready() -> bool:
        nonlocal last
        last = page_text(session)
        return bool(until(last))

    try:
        _poll(ready, timeout, f"{url} to show the expected text", interval=0.2)
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; the page read: {last[:2000]!r}") from exc
    return last


def screenshot(session: PipeCDPSession | CDPSession, out_png: str | os.PathLike[str],
               full_page: bool = False) -> Path:
    """Save the page as a PNG (the whole page with ``full_page``)."""
    params: dict[str, Any] = {"format": "png"}
    if full_page:
        metrics = session.call("Page.getLayoutMetrics")
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": size["height"],
                          "scale": 1}
        params["captureBeyondViewport"] = True
    shot = session.call("Page.captureScreenshot", **params)
    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(base64.b64decode(shot["data"]))
    return out


@dataclass(frozen=True)
class Capture:
    """Result of :func:`capture_dashboard`.

    Attributes:
        path: The PNG written.
        tasks: Tasks in the task-stream plot when it was captured.
        coloured_fraction: Share of the task-stream canvas covered by task colours.
        seconds: Time from navigation to capture.
    """

    path: Path
    tasks: int
    coloured_fraction: float
    seconds: float


def capture_dashboard(
    url: str,
    out_png: str | os.PathLike[str],
    *,
    timeout: float = 60,
    width: int = 1400,
    height: int = 900,
    min_tasks: int = 1,
    min_fraction: float = 0.01,
    chromium: str | None = None,
    on_navigated: Any = None,
) -> Capture:
    """Open the dashboard in headless Chromium, wait for the drawn task stream, save a PNG.

    Args:
        url: Dashboard page holding the task stream, e.g. ``http://127.0.0.1:8787/status``.
        out_png: Where to write the screenshot.
        timeout: Seconds for the whole capture (browser start, load, drawing).
        width: Viewport width in CSS pixels.
        height: Viewport height in CSS pixels.
        min_tasks: Tasks the task stream must hold before capturing.
        min_fraction: Share of the task-stream canvas that must be coloured by tasks.
        chromium: Chromium executable; found on ``PATH`` when ``None``.
        on_navigated: Called once the page is opening (e.g. to start the job to watch).

    Returns:
        What was captured.

    Raises:
        ChromiumNotFoundError: No Chromium binary.
        TimeoutError: The task stream was not drawn within ``timeout``; the last page status is
            in the message.
    """
    deadline = time.monotonic() + timeout

    def remaining() -> float:
        return max(1.0, deadline - time.monotonic())

    out = Path(out_png)
    with chromium_page(width, height, timeout=remaining(), binary=chromium) as cdp:
        try:
            start = time.monotonic()
            cdp.call("Page.navigate", url=url)
            if on_navigated is not None:
                on_navigated()
            expression = _DRAWN_JS % (min_tasks, min_fraction)
            last: dict[str, Any] = {}

            def drawn() -> bool:
                nonlocal last
                last = cdp.evaluate(expression) or {}
                return bool(last.get("drawn"))

            try:
                _poll(drawn, remaining(), "the task stream to be drawn", interval=0.2)
            except TimeoutError as exc:
                raise TimeoutError(f"{exc}; last page status: {last}") from exc
            shot = cdp.call("Page.captureScreenshot", format="png")
            seconds = time.monotonic() - start
        finally:
            cdp.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(base64.b64decode(shot["data"]))
    return Capture(out, int(last["tasks"]), float(last["fraction"]), seconds)


def demo_capture(
    out_png: str | os.PathLike[str],
    *,
    views: tuple[str, ...] = ("force-signals", "camera-frames", "joint-states"),
    tasks_per_view: int = 120,
    task_seconds: float = 0.01,
    timeout: float = 60,
    width: int = 1400,
    height: int = 900,
) -> Capture:
    """Capture the dashboard of a 2-worker LocalCluster in the middle of a run.

    Tasks are keyed ``export-part-<view>-<i>`` like the export's, one colour per view
    in the task stream. Two thirds of each view's tasks run first; the rest are then submitted
    gated on a ``distributed.Event`` that is set only after the capture, so the screenshot is
    taken mid-run by construction.

    Args:
        out_png: Where to write the screenshot.
        views: View names for the task keys.
        tasks_per_view: Tasks per view.
        task_seconds: Duration of each task.
        timeout: Seconds allowed for the capture.
        width: Viewport width.
        height: Viewport height.

    Returns:
        What was captured.
    """
    from distributed import Client, Event, LocalCluster, get_task_stream, wait

    # The tasks are stdlib/distributed callables, so workers can unpickle them however this
    # module was loaded (script, import by path, ...).
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address="127.0.0.1:0",
            host="127.0.0.1",
        ) as cluster,
        Client(cluster) as client,
        # installs the scheduler's task-stream recorder now; otherwise the dashboard adds it
        # when the page is first opened and would miss the tasks that ran before
        get_task_stream(client=client),
    ):
        gate = Event(f"guideloom-demo-capture-{os.getpid()}", client=client)

        def submit(indices: range, gated: bool) -> list[Any]:
            # a gated task blocks on the Event (set after the capture); the others "work" for
            # 0.5x to 1.5x task_seconds, varied so the stream looks like a real run
            return [
                client.submit(
                    gate.wait if gated else time.sleep,
                    timeout if gated else task_seconds * (0.5 + (i * 7 + j * 3) % 11 / 10),
                    key=f"export-part-{view}-{i}",
                    pure=False,
                )
                for i in indices
                for j, view in enumerate(views)
            ]

        split = (2 * tasks_per_view) // 3
        done = submit(range(split), gated=False)  # kept referenced: progress shows them done
        wait(done, timeout=timeout)
        # the rest is submitted but held until after the capture: the run is mid-way by design
        held = submit(range(split, tasks_per_view), gated=True)
        try:
            url = cluster.dashboard_link.replace("localhost", "127.0.0.1")
            result = capture_dashboard(
                url,
                out_png,
                timeout=timeout,
                width=width,
                height=height,
                min_tasks=split * len(views),
            )
        finally:
            gate.set()
        wait(held, timeout=timeout)
        del done
        return result


def export_capture(
    out_png: str | os.PathLike[str],
    *,
    n: int = 1500,
    timeout: float = 120,
    width: int = 1400,
    height: int = 900,
) -> Capture:
    """Capture the dashboard while the demo export (``workflows/force_signals.toml``) runs.

    Writes ``n`` demo experiments to a temporary directory, starts a 2-worker LocalCluster on
    127.0.0.1, opens its dashboard, starts the real export once the page is opening, and takes
    the picture when the task stream shows the first tasks, while the export is still running.
    """
    import tempfile
    import threading

    from distributed import Client, LocalCluster, get_task_stream

    from guideloom.demo import make_demo_data
    from guideloom.export.run import run_export
    from guideloom.workflow.load import load_workflow

    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        make_demo_data(Path(tmp) / "data", n=n)
        workflow = load_workflow(repo / "workflows" / "force_signals.toml",
                                 data_dir=Path(tmp) / "data", output=Path(tmp) / "export")
        spec = workflow.to_spec()
        with (
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                         dashboard_address="127.0.0.1:0", host="127.0.0.1") as cluster,
            Client(cluster) as client,
            get_task_stream(client=client),
        ):
            errors: list[BaseException] = []

            def export() -> None:
                try:
                    run_export(spec, client=client)
                except BaseException as exc:
                    errors.append(exc)

            job = threading.Thread(target=export, name="demo-export")
            url = cluster.dashboard_link.replace("localhost", "127.0.0.1")
            result = capture_dashboard(url, out_png, timeout=timeout, width=width,
                                       height=height, min_tasks=40, on_navigated=job.start)
            job.join(timeout)
            if errors:
                raise errors[0]
    return result


def main(argv: list[str] | None = None) -> int:
    """Command line: capture a running dashboard, or ``--demo`` to run a small cluster too."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", nargs="?", help="dashboard URL, e.g. http://127.0.0.1:8787/status")
    parser.add_argument("out", type=Path, help="PNG to write")
    parser.add_argument("--demo", action="store_true",
                        help="run the demo export on a 2-worker LocalCluster and capture it")
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=900)
    parser.add_argument("--min-tasks", type=int, default=1, help="tasks drawn before capture")
    args = parser.parse_args(argv)
    if args.demo:
        if args.url is not None:
            parser.error("--demo takes only the output path")
        cap = export_capture(args.out, timeout=max(args.timeout, 120), width=args.width,
                             height=args.height)
    elif args.url is None:
        parser.error("give the dashboard URL, or --demo")
    else:
        cap = capture_dashboard(
            args.url,
            args.out,
            timeout=args.timeout,
            width=args.width,
            height=args.height,
            min_tasks=args.min_tasks,
        )
    print(
        f"wrote {cap.path} ({cap.tasks} tasks drawn, {cap.coloured_fraction:.0%} of the task "
        f"stream coloured, {cap.seconds:.1f} s after navigation)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def _stop_browser(proc: subprocess.Popen, browser: psutil.Process) -> None:
    """End Chromium and every process it started (SIGTERM to its group, then SIGKILL)."""
    family = [browser]
    with contextlib.suppress(psutil.NoSuchProcess):
        family += browser.children(recursive=True)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    _gone, alive = psutil.wait_procs(family, timeout=10)
    if alive:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        psutil.wait_procs(alive, timeout=10)
    proc.wait(timeout=10)
