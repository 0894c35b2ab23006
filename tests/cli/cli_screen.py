"""A tiny terminal emulator: what a program's output looks like on screen.

prompt_toolkit redraws only what changed (moving the cursor over unchanged
cells), so its raw output is no text to search. Fed into a Screen, it becomes
the lines a person sees. Enough of VT100 for prompt_toolkit and plain
output: printable characters, CR, LF, BS, cursor moves (CUU/CUD/CUF/CUB/CHA/
CUP), erase in line/display; colours and modes are ignored.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(
    r"\x1b\[([0-9;?]*)([A-Za-z@])|\x1b[()][A-Za-z0-9]|\x1b[=>78]|"
    r"\x1b\][^\x07]*\x07|([\r\n\b\x07])|([^\x1b\r\n\b\x07]+)"
)


class Screen:
    def __init__(self, columns: int = 200) -> None:
        self.columns = columns
        self.lines: list[list[str]] = [[]]
        self.row = 0
        self.col = 0

    # ---- input ----------------------------------------------------------------
    def feed(self, data: str) -> None:
        for match in _TOKEN.finditer(data):
            params, final, control, text = match.groups()
            if text is not None:
                for char in text:
                    self._put(char)
            elif control is not None:
                self._control(control)
            elif final is not None:
                self._csi(params or "", final)

    def _line(self) -> list[str]:
        while len(self.lines) <= self.row:
            self.lines.append([])
        return self.lines[self.row]

    def _put(self, char: str) -> None:
        line = self._line()
        while len(line) < self.col:
            line.append(" ")
        if self.col < len(line):
            line[self.col] = char
        else:
            line.append(char)
        self.col += 1

    def _control(self, char: str) -> None:
        if char == "\r":
            self.col = 0
        elif char == "\n":
            self.row += 1
            self._line()
        elif char == "\b":
            self.col = max(0, self.col - 1)

    def _csi(self, params: str, final: str) -> None:
        if params.startswith("?"):
            return  # private modes: cursor visibility, bracketed paste, autowrap
        numbers = [int(p) if p else 0 for p in params.split(";")] if params else []
        n = numbers[0] if numbers and numbers[0] else 1
        if final == "A":
            self.row = max(0, self.row - n)
        elif final == "B":
            self.row += n
            self._line()
        elif final == "C":
            self.col += n
        elif final == "D":
            self.col = max(0, self.col - n)
        elif final == "G":
            self.col = n - 1
        elif final in "Hf":
            self.row = (numbers[0] - 1) if numbers and numbers[0] else 0
            self.col = (numbers[1] - 1) if len(numbers) > 1 and numbers[1] else 0
            self._line()
        elif final == "K":
            mode = numbers[0] if numbers else 0
            line = self._line()
            if mode == 0:
                del line[self.col :]
            elif mode == 2:
                line.clear()
        elif final == "J":
            mode = numbers[0] if numbers else 0
            if mode == 0:
                del self._line()[self.col :]
                del self.lines[self.row + 1 :]
            elif mode in (2, 3):
                self.lines = [[]]
                self.row = self.col = 0

    # ---- output ---------------------------------------------------------------
    def text(self, from_row: int = 0) -> str:
        return "\n".join("".join(line).rstrip() for line in self.lines[from_row:])

    def cursor_line(self) -> str:
        return "".join(self._line()).rstrip()
