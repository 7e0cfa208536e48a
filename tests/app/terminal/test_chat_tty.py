"""`switchboard chat` at a real terminal (a pseudo-terminal), against the fake model server: the answer
rendered as Markdown for a person (and left as written when piped), the status line cleared once the
answer is in, and Ctrl-C at the prompt ending on a line of its own."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.app.runtime_support import app_command
from tests.app.terminal.test_chat import anthropic_env, chat_env, run_chat
from tests.fakes.model_server import FakeModelServer

ANSWER = "**Deploys** go out on *Fridays*:\n\n- build\n- ship"
TIMEOUT = 60
CLEAR_LINE = "\r\x1b[2K"  # carriage return, erase the line


@dataclass
class Terminal:
    process: subprocess.Popen[bytes]
    master: int
    screen: str = ""
    _chunks: list[bytes] = field(default_factory=list)

    def read_until(self, done: Callable[[str], bool], within: float = TIMEOUT) -> str:
        deadline = time.monotonic() + within
        while not done(self.screen):
            if time.monotonic() > deadline:
                raise AssertionError(f"not seen within {within}s:\n{self.screen!r}")
            readable, _, _ = select.select([self.master], [], [], 0.1)
            if readable:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:  # the other side closed: the process is gone
                    chunk = b""
                if not chunk and self.process.poll() is not None:
                    raise AssertionError(f"exited before it was seen:\n{self.screen!r}")
                self._chunks.append(chunk)
                self.screen = b"".join(self._chunks).decode(errors="replace")
        return self.screen

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def wait(self) -> int:
        code = self.process.wait(timeout=TIMEOUT)
        self.read_until(lambda _: True)
        while select.select([self.master], [], [], 0.2)[0]:  # what it wrote before exiting
            try:
                chunk = os.read(self.master, 4096)
            except OSError:
                break
            if not chunk:
                break
            self._chunks.append(chunk)
        self.screen = b"".join(self._chunks).decode(errors="replace")
        return code


@contextmanager
def terminal(tmp_path: Path, env: dict[str, str], *args: str) -> Iterator[Terminal]:
    """The chat with stdin, stdout and stderr all on one pseudo-terminal, as in a person's shell."""
    master, slave = pty.openpty()
    process = subprocess.Popen(
        app_command("chat", *args),
        cwd=tmp_path,
        env=chat_env(tmp_path, env),
        stdin=slave,
        stdout=slave,
        stderr=slave,
    )
    os.close(slave)
    try:
        yield Terminal(process, master)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(master)


def test_an_answer_at_a_terminal_is_rendered_markdown(
    fake_anthropic: FakeModelServer, tmp_path: Path
) -> None:
    fake_anthropic.script(ANSWER)
    with terminal(tmp_path, anthropic_env(fake_anthropic), "--thread", "t", "how do we deploy?") as term:
        assert term.wait() == 0, term.screen

    assert "Deploys" in term.screen and "Fridays" in term.screen
    assert "**" not in term.screen and "*Fridays*" not in term.screen
    assert "- build" not in term.screen and "build" in term.screen  # a bullet, not a dash


def test_an_answer_piped_elsewhere_is_the_text_as_written(
    fake_anthropic: FakeModelServer, tmp_path: Path
) -> None:
    fake_anthropic.script(ANSWER)
    result = run_chat(tmp_path, anthropic_env(fake_anthropic), "--thread", "t", "how do we deploy?")

    assert (result.returncode, result.stdout) == (0, ANSWER + "\n"), result.stderr


def test_the_status_line_is_cleared_when_the_answer_arrives(
    fake_anthropic: FakeModelServer, tmp_path: Path
) -> None:
    fake_anthropic.script("Fridays.")
    with terminal(tmp_path, anthropic_env(fake_anthropic), "--thread", "t") as term:
        term.read_until(lambda screen: "you> " in screen)
        term.type("when do we deploy?\n")
        term.read_until(lambda screen: "Fridays." in screen)
        term.type("/exit\n")
        assert term.wait() == 0, term.screen

    status = term.screen.rindex("…)")  # the last status line shown, "(<something>…)"
    answer = term.screen.rindex("Fridays.")
    assert status < term.screen.rindex(CLEAR_LINE, 0, answer) < answer, repr(term.screen)


def test_ctrl_c_at_the_prompt_ends_on_a_new_line(fake_anthropic: FakeModelServer, tmp_path: Path) -> None:
    with terminal(tmp_path, anthropic_env(fake_anthropic), "--thread", "t") as term:
        term.read_until(lambda screen: "you> " in screen)
        time.sleep(0.2)  # the prompt is up and the reader waits on it
        term.process.send_signal(signal.SIGINT)
        term.wait()

    after_prompt = term.screen[term.screen.rindex("you> ") + len("you> ") :]
    assert after_prompt.endswith("\r\n"), repr(term.screen)
