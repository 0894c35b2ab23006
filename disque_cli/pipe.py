"""--pipe: mass insertion of raw protocol read from stdin, like redis-cli --pipe.

Stdin is written to the node as it is while replies are read at the same
time (so neither side's buffers fill up). At end of input a PING carrying 20
random bytes is sent: its echo is the last reply, which says everything
before it was answered. Error replies go to stderr; the summary
`errors: N, replies: M` goes to stdout; the exit status is 1 if any error.
"""

from __future__ import annotations

import os
import selectors
import sys
import time
from typing import TextIO

import hiredis

from disque_cli.connection import Disconnected, Session

CHUNK = 64 * 1024


def _magic_command(magic: bytes, input_ended_mid_line: bool) -> bytes:
    # A CRLF first ends an unterminated last line of input (redis-cli always sends
    # it; only when needed here, as some servers take a stray CRLF badly).
    command = b"*2\r\n$4\r\nPING\r\n$%d\r\n%s\r\n" % (len(magic), magic)
    return b"\r\n" + command if input_ended_mid_line else command


def run(
    session: Session,
    timeout: int,
    stdin_fd: int | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    stdin_fd = sys.stdin.fileno() if stdin_fd is None else stdin_fd
    try:
        sock = session.socket()
    except Disconnected as exc:
        print(exc, file=err)
        return 1
    sock.setblocking(False)
    reader = hiredis.Reader()
    magic = os.urandom(20)
    errors = replies = 0
    pending = b""
    last_byte = b"\n"
    eof = done = False
    last_read = time.monotonic()
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
    try:
        while not done:
            want = selectors.EVENT_READ
            if not eof or pending:
                want |= selectors.EVENT_WRITE
            selector.modify(sock, want)
            for _key, events in selector.select(timeout=1.0):
                if events & selectors.EVENT_READ:
                    try:
                        data = sock.recv(CHUNK)
                    except BlockingIOError:
                        data = None
                    except OSError as exc:
                        print(f"Error reading from the server: {exc.strerror}", file=err)
                        return 1
                    if data == b"":
                        print("Error reading from the server: Connection closed", file=err)
                        return 1
                    if data:
                        reader.feed(data)
                        last_read = time.monotonic()
                    while (reply := reader.gets()) is not False:
                        if isinstance(reply, hiredis.ReplyError):
                            print(reply, file=err)
                            errors += 1
                        elif eof and reply == magic:
                            print("Last reply received from server.", file=out, flush=True)
                            done = True
                            continue
                        replies += 1
                if events & selectors.EVENT_WRITE:
                    if not pending and not eof:
                        chunk = os.read(stdin_fd, CHUNK)
                        if chunk:
                            pending = chunk
                            last_byte = chunk[-1:]
                        else:
                            eof = True
                            pending = _magic_command(magic, last_byte != b"\n")
                            print(
                                "All data transferred. Waiting for the last reply...",
                                file=out,
                                flush=True,
                            )
                    if pending:
                        try:
                            sent = sock.send(pending)
                        except BlockingIOError:
                            sent = 0
                        except OSError as exc:
                            print(f"Error writing to the server: {exc.strerror}", file=err)
                            return 1
                        pending = pending[sent:]
            if eof and timeout > 0 and time.monotonic() - last_read > timeout:
                print(f"No replies for {timeout} seconds: exiting.", file=err)
                errors += 1
                break
    finally:
        selector.close()
        session.close()
    print(f"errors: {errors}, replies: {replies}", file=out, flush=True)
    return 1 if errors else 0
