"""The command line prints what it printed before library messages became log records.

``tests/fixtures/cli_output.json`` was recorded from ``main`` before the change (run this file
as a script to record it again: ``python tests/test_cli_output_unchanged.py``). Each case runs
real ``python -m guideloom`` processes in a temporary directory; only what varies between runs
(the temporary path, times, rates, ports, dates, progress bars) is masked.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

GOLDEN = Path(__file__).parent / "fixtures" / "cli_output.json"

CASES: list[tuple[str, list[str], dict[str, str]]] = [
    ("make-demo-data", ["make-demo-data", "data", "--n", "6"], {}),
    ("views", ["views", "data"], {}),
    ("workflows", ["workflows"], {}),
    ("run", ["run", "force_signals", "--data-dir", "data", "--output", "out",
             "--scheduler", "sync"], {}),
    ("run-again", ["run", "force_signals", "--data-dir", "data", "--output", "out",
                   "--scheduler", "sync"], {}),
    ("status", ["status", "out"], {}),
    ("inspect", ["inspect", "out"], {}),
    ("verify", ["verify", "out"], {}),
    ("run-killed", ["run", "force_signals", "--data-dir", "data", "--output", "cut",
                    "--scheduler", "sync"], {"GUIDELOOM_FAULT_POINT": "finalize-started"}),
    ("status-interrupted", ["status", "cut"], {}),
    ("inspect-interrupted", ["inspect", "cut"], {}),
    ("run-resumed", ["run", "force_signals", "--data-dir", "data", "--output", "cut",
                     "--scheduler", "sync"], {}),
    ("run-overwrite-auto", ["run", "force_signals", "--data-dir", "data", "--output", "out",
                            "--overwrite", "--report", "report.html"], {}),
    ("demo", ["demo", "--data-dir", "demo", "--n", "6", "--dashboard", "127.0.0.1:0"], {}),
]

_MASKS = [
    (re.compile(r"[^\n]*\r"), ""),  # tqdm redraws: keep only each bar's last state
    (re.compile(r"[^\n]*\|[^\n]*(?:(?:exp|file|step)/s|s/(?:exp|file|step))[^\n]*"),
     "<BAR>"),  # a tqdm bar (a slow one shows s/exp)
    (re.compile(r"(?:<BAR>\n)+"), "<BAR>\n"),  # how many redraws tqdm shows varies
    (re.compile(r"\d{4}-\d\d-\d\dT[0-9:.+-]+Z?"), "<DATE>"),
    (re.compile(r"(127\.0\.0\.1|localhost):\d+"), r"\1:<PORT>"),
    (re.compile(r"\b[0-9a-f]{12,}\b"), "<HEX>"),
    (re.compile(r"\d+ [kMG]B/s"), "<RATE>"),
    (re.compile(r"\d+\.\d+"), "<N>"),
    (re.compile(r"\b\d+ s ago"), "<N> s ago"),
]


def mask(text: str, tmp: Path) -> str:
    """``text`` with what varies between runs replaced by placeholders."""
    text = text.replace(str(tmp.resolve()), "<TMP>").replace(str(tmp), "<TMP>")
    for pattern, placeholder in _MASKS:
        text = pattern.sub(placeholder, text)
    return text


def _aligned(case: dict[str, object]) -> dict[str, object]:
    """``case`` without the padding that right-aligns a masked number (its width varies)."""
    return {k: re.sub(r" +<N>", " <N>", v) if isinstance(v, str) else v for k, v in case.items()}


def run_cases(tmp: Path) -> dict[str, dict[str, object]]:
    """Run every case in ``tmp`` in order; return each one's exit code and masked streams."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GUIDELOOM_")}
    env["PYTHONWARNINGS"] = "ignore::DeprecationWarning"
    env["GUIDELOOM_PHASE_LINE_S"] = "0"  # every phase's line, however short, as main printed
    seen: dict[str, dict[str, object]] = {}
    for name, args, extra in CASES:
        done = subprocess.run([sys.executable, "-m", "guideloom", *args], cwd=tmp,
                              env={**env, **extra}, capture_output=True, text=True,
                              timeout=300, check=False)
        seen[name] = {"rc": done.returncode, "stdout": mask(done.stdout, tmp),
                      "stderr": mask(done.stderr, tmp)}
    return seen


def test_cli_output_is_byte_for_byte_what_main_printed(tmp_path):
    expected = json.loads(GOLDEN.read_text())
    seen = run_cases(tmp_path)
    for name, _, _ in CASES:
        assert _aligned(seen[name]) == _aligned(expected[name]), name


if __name__ == "__main__":  # record the fixture (from the code before the change)
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        GOLDEN.write_text(json.dumps(run_cases(Path(folder)), indent=1, sort_keys=True) + "\n")
    print(f"recorded {GOLDEN}")
