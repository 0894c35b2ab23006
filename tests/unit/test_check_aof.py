"""disque-check-aof's command line (typer), in this process: what it parses, what a
command line that does not parse gives (one line on stderr, exit status 2), and
the messages and exit statuses of a check and a fix, with and without a terminal.
No node: the files are the fixture C Disque 1.0-rc1 wrote, and a cut copy of it.
test_persistence.py and test_aof_disque.py run the command on a node's files."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import pytest
import typer.main

from disque_server.check_aof import PROG, app, check, main

pytestmark = pytest.mark.timeout(30)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "aof" / "disque-1.0-rc1.aof"
TAIL = b"*2\r\n$6\r\nDELJ"  # a record cut short


def parsed(*args: str) -> dict:
    """What the command line gives the command, parsed as the command parses it."""
    with typer.main.get_command(app).make_context(PROG, list(args)) as ctx:
        return dict(ctx.params)


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    assert lines[0].startswith(f"{PROG}: ")
    assert "Traceback" not in text
    return lines[0]


@pytest.fixture
def good(tmp_path: Path) -> Path:
    path = tmp_path / "good.aof"
    shutil.copy(FIXTURE, path)
    return path


@pytest.fixture
def cut(tmp_path: Path) -> Path:
    path = tmp_path / "cut.aof"
    path.write_bytes(FIXTURE.read_bytes() + TAIL)
    return path


class Terminal(io.StringIO):
    """Standard input as a terminal that types `text`."""

    def isatty(self) -> bool:
        return True


def test_the_command_line() -> None:
    assert parsed("disque.aof") == {"file": "disque.aof", "fix": False}
    assert parsed("--fix", "disque.aof") == {"file": "disque.aof", "fix": True}
    assert parsed("disque.aof", "--fix") == {"file": "disque.aof", "fix": True}
    assert parsed("--", "-odd.aof") == {"file": "-odd.aof", "fix": False}


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help(capsys: pytest.CaptureFixture[str], flag: str) -> None:
    assert main([flag]) == 0
    out = capsys.readouterr().out
    assert f"Usage: {PROG} [OPTIONS] " in out and "FILE" in out
    assert "Check (and fix) a Disque append only file." in out
    assert "truncate the file after the last good record" in out


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([], "Missing argument 'FILE'"),
        (["--fix"], "Missing argument 'FILE'"),
        (["--bogus", "disque.aof"], "No such option: --bogus"),
        (["--fi", "disque.aof"], "No such option: --fi"),  # no abbreviations, unlike argparse
        (["a.aof", "b.aof"], "Got unexpected extra argument"),
        (["--fix=yes", "disque.aof"], "Option '--fix' does not take a value"),
    ],
)
def test_a_command_line_that_does_not_parse(
    capsys: pytest.CaptureFixture[str], args: list[str], words: str
) -> None:
    assert main(args) == 2
    out, err = capsys.readouterr()
    line = one_line(err)
    assert words in line
    assert line.endswith(" (see --help)") and not line.endswith(". (see --help)")
    assert out == ""


def test_a_valid_file(capsys: pytest.CaptureFixture[str], good: Path) -> None:
    size = good.stat().st_size
    offset, records, reason = check(str(good))
    assert (offset, reason) == (size, "") and records > 0
    for args in ([str(good)], ["--fix", str(good)]):
        assert main(args) == 0
        assert capsys.readouterr() == (f"AOF is valid: {records} records, {size} bytes\n", "")
        assert good.stat().st_size == size


def test_a_file_that_cannot_be_opened(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "missing.aof"
    assert main([str(missing)]) == 1
    assert capsys.readouterr() == ("", f"Cannot open file {missing}: No such file or directory\n")


def analysis(path: Path) -> str:
    good = FIXTURE.stat().st_size
    records = check(str(FIXTURE))[1]
    return (
        f"AOF analyzed: size={path.stat().st_size}, ok_up_to={good}, diff={len(TAIL)}, "
        f"records ok={records}\n"
        f"0x{good:08x}: Expected a complete record: truncated record at the end of the file\n"
    )


def test_a_bad_tail_is_reported_not_cut(capsys: pytest.CaptureFixture[str], cut: Path) -> None:
    size = cut.stat().st_size
    assert main([str(cut)]) == 1
    out, err = capsys.readouterr()
    assert out == analysis(cut) + "AOF is not valid. Use the --fix option to try fixing it.\n"
    assert err == ""
    assert cut.stat().st_size == size


def test_fix_without_a_terminal_asks_nothing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, cut: Path
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))  # not a terminal: not read
    expected = analysis(cut)
    assert main(["--fix", str(cut)]) == 0
    assert capsys.readouterr().out == expected + "Successfully truncated AOF\n"
    assert cut.read_bytes() == FIXTURE.read_bytes()


@pytest.mark.parametrize("answer", ["y\n", "YES\n", " yes \n"])
def test_fix_on_a_terminal_yes(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, cut: Path, answer: str
) -> None:
    monkeypatch.setattr("sys.stdin", Terminal(answer))
    size, good = cut.stat().st_size, FIXTURE.stat().st_size
    expected = analysis(cut)
    assert main(["--fix", str(cut)]) == 0
    assert capsys.readouterr().out == (
        expected
        + f"This will shrink the AOF from {size} bytes, with {len(TAIL)} bytes, to {good} bytes\n"
        + "Continue? [y/N]: Successfully truncated AOF\n"
    )
    assert cut.read_bytes() == FIXTURE.read_bytes()


@pytest.mark.parametrize("answer", ["n\n", "\n", "maybe\n", ""])  # "": Ctrl-D
def test_fix_on_a_terminal_no(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, cut: Path, answer: str
) -> None:
    monkeypatch.setattr("sys.stdin", Terminal(answer))
    before = cut.read_bytes()
    assert main(["--fix", str(cut)]) == 1
    out, err = capsys.readouterr()
    assert out.startswith(analysis(cut) + "This will shrink the AOF")
    assert out.endswith("Continue? [y/N]: " + ("\n" if not answer else "") + "Aborting...\n")
    assert err == ""
    assert cut.read_bytes() == before


def test_ctrl_c_at_the_question_is_a_no(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, cut: Path
) -> None:
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))

    def interrupted(prompt: str) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr("builtins.input", interrupted)
    before = cut.read_bytes()
    assert main(["--fix", str(cut)]) == 1
    assert capsys.readouterr() == (analysis(cut) + "\nAborting...\n", "")
    assert cut.read_bytes() == before


def test_a_file_that_cannot_be_truncated(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, cut: Path
) -> None:
    def refused(path: str, length: int) -> None:
        raise PermissionError(13, os.strerror(13), path)

    monkeypatch.setattr(os, "truncate", refused)
    assert main(["--fix", str(cut)]) == 1
    out, err = capsys.readouterr()
    assert "Successfully" not in out
    assert err == f"Cannot truncate file {cut}: Permission denied\n"
