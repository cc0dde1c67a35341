"""Helpers shared by the command-line front ends (``megha``, ``megha reproduce``, ``megha sweep``, ``megha live``):
the consoles, the error exit, and parsers for ``key=value`` options."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console


def _console(stderr: bool = False) -> Console:
    """A console; written to a file or a pipe (a log, CI) it is 160 columns wide instead of Rich's 80, so tables
    stay readable (``COLUMNS`` still decides when set)."""
    import os

    c = Console(stderr=stderr)
    if not c.is_terminal and "COLUMNS" not in os.environ:
        c = Console(stderr=stderr, width=160)
    return c


console = _console(stderr=True)
out_console = _console()


def fail(msg: str, code: int = 2) -> None:
    """Print ``msg`` as an error on stderr and exit with ``code`` (2: bad input)."""
    console.print(f"[bold red]error:[/] {msg}", highlight=False)
    raise typer.Exit(code)


def parse_opts(items: list[str] | None) -> dict[str, Any]:
    """``key=value`` pairs; values are parsed as JSON when they can be (numbers, booleans, lists)."""
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            fail(f"--opt expects key=value, got {item!r}")
        k, v = item.split("=", 1)
        k = k.strip().replace("-", "_")
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out


def parse_pairs(text: str | None, what: str) -> dict[str, float] | None:
    """``cpu=64,mem=16`` → {'cpu': 64.0, 'mem': 16.0}."""
    if text is None:
        return None
    out = {}
    for part in text.split(","):
        if "=" not in part:
            fail(f"{what} expects name=value[,name=value], got {text!r}")
        k, v = part.split("=", 1)
        try:
            out[k.strip()] = float(v)
        except ValueError:
            fail(f"{what}: {v!r} is not a number")
    return out


def check_out_dir(out: Path, force: bool, what: str = "--out", flag: str = "--force") -> None:
    """Refuse to write into a non-empty directory (or over a file) unless ``force``; raises InputError."""
    from megha.errors import InputError

    if out.exists() and not out.is_dir():
        raise InputError(f"{what} {out}: exists and is not a directory")
    if not force and out.is_dir() and any(out.iterdir()):
        raise InputError(f"{what} {out}: the directory is not empty (use {flag} to replace its contents)")


def clear_out_dir(out: Path) -> None:
    """Empty ``out`` (once :func:`check_out_dir` allowed it), so old outputs never mix with new ones."""
    import shutil

    if out.is_dir():
        for p in out.iterdir():
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
