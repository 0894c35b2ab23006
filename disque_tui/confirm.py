"""`ConfirmScreen`: the dialog every action that changes the cluster goes
through. It shows a question and a row of choices, each with a key; it
dismisses with the chosen value, or None on Escape / Cancel."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.events import Key
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

Choice = tuple[str, str, str]  # (value, button label, key)


class ConfirmScreen(ModalScreen[str | None]):
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical {
        width: auto; min-width: 44; max-width: 90%; height: auto;
        border: thick $warning; background: $surface; padding: 1 2;
    }
    ConfirmScreen #confirm-title { text-style: bold; color: $warning; margin-bottom: 1; }
    ConfirmScreen #confirm-question { margin-bottom: 1; }
    ConfirmScreen Horizontal { height: auto; width: auto; }
    ConfirmScreen Button { margin: 0 1 0 0; min-width: 8; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, question: str, choices: Sequence[Choice]) -> None:
        super().__init__()
        self.title_text = title
        self.question = question
        self.choices = list(choices)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.title_text, id="confirm-title")
            yield Static(self.question, id="confirm-question")
            with Horizontal():
                for value, label, key in self.choices:
                    yield Button(
                        Text(f"{label} ({key})"),
                        id=f"choice-{value}",
                        variant="warning" if value not in ("no", "cancel") else "default",
                    )
                yield Button(Text("Cancel (esc)"), id="choice-cancel")

    def on_mount(self) -> None:
        self.query_one("#choice-cancel", Button).focus()

    def on_key(self, event: Key) -> None:
        for value, _, key in self.choices:
            if event.key == key:
                event.stop()
                self.dismiss(value)
                return

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        value = (event.button.id or "").removeprefix("choice-")
        self.dismiss(None if value == "cancel" else value)

    def action_cancel(self) -> None:
        self.dismiss(None)
