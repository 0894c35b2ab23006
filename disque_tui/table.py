"""`SnapshotTable`: a lean table widget redrawn from snapshots.

Each snapshot gives the full list of rows in display order, each with a
logical key (a node ID, a queue name) and one cell per column (a str, or a
Rich `Text` for colour). The widget keeps one rendered line per row and
renders only the rows on screen (Textual's Line API), so a new snapshot of
hundreds of rows costs a comparison per row and a re-render of the rows that
changed; Textual's DataTable would measure and re-render every cell each
time. The header stays on top, the cursor follows its logical key across
re-sorts, and the table scrolls both ways.

Keys: up/down, page up/down, home/end move the cursor, left/right scroll,
enter selects; a click selects a row, a click on the header a column.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len as str_cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

Cell = str | Text
Column = tuple[str, str | Text]  # (key, label)
Row = tuple[str, Sequence[Cell]]  # (logical key, cells)
PAD = 1  # spaces either side of a cell


def cell_len(value: Cell) -> int:
    return str_cell_len(value) if type(value) is str else value.cell_len


def plain(value: Cell) -> str:
    return value.plain if isinstance(value, Text) else value


class SnapshotTable(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    SnapshotTable { height: 1fr; background: $surface; }
    SnapshotTable > .snapshot-table--header { background: $panel; text-style: bold; }
    SnapshotTable > .snapshot-table--cursor {
        background: $block-cursor-background; color: $block-cursor-foreground;
        text-style: bold;
    }
    SnapshotTable > .snapshot-table--cursor-blurred {
        background: $block-cursor-blurred-background;
    }
    """
    COMPONENT_CLASSES = {
        "snapshot-table--header",
        "snapshot-table--cursor",
        "snapshot-table--cursor-blurred",
    }
    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "edge(0)", "First", show=False),
        Binding("end", "edge(1)", "Last", show=False),
        Binding("left", "scroll_left", "Left", show=False),
        Binding("right", "scroll_right", "Right", show=False),
        Binding("enter", "select", "Select", show=False),
    ]

    cursor_row: reactive[int] = reactive(0, always_update=False)

    class RowHighlighted(Message):
        def __init__(self, table: SnapshotTable, key: str | None) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> SnapshotTable:
            return self.table

    class RowSelected(RowHighlighted):
        pass

    class HeaderSelected(Message):
        def __init__(self, table: SnapshotTable, column: str) -> None:
            super().__init__()
            self.table = table
            self.column = column

        @property
        def control(self) -> SnapshotTable:
            return self.table

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._columns: list[Column] = []
        self._widths: list[int] = []
        self._keys: list[str] = []
        self._cells: list[tuple[Cell, ...]] = []
        self._lines: dict[int, Strip] = {}  # rendered rows (without cursor)
        self._header: Strip | None = None
        self._style_cache: tuple[Style, Style, Style] | None = None

    # ---- reading -------------------------------------------------------------------
    @property
    def keys(self) -> list[str]:
        """Logical keys in display order."""
        return list(self._keys)

    @property
    def row_count(self) -> int:
        return len(self._keys)

    @property
    def selected_key(self) -> str | None:
        """The logical key of the row under the cursor."""
        return self.key_at(self.cursor_row)

    def key_at(self, row: int) -> str | None:
        return self._keys[row] if 0 <= row < len(self._keys) else None

    def value(self, key: str, column: str) -> Cell:
        """The cell shown for logical row `key` in `column`."""
        index = [k for k, _ in self._columns].index(column)
        return self._cells[self._keys.index(key)][index]

    def text(self, key: str, column: str) -> str:
        return plain(self.value(key, column))

    def labels(self) -> list[str]:
        return [plain(label) for _, label in self._columns]

    # ---- writing -------------------------------------------------------------------
    def set_columns(self, columns: Sequence[Column]) -> None:
        spec = list(columns)
        if spec != self._columns:
            self._columns = spec
            self._relayout()

    def select_key(self, key: str) -> None:
        if key in self._keys:
            self.cursor_row = self._keys.index(key)

    def show_rows(self, rows: Sequence[Row]) -> None:
        """Show `rows` (in display order); the cursor stays on its logical key."""
        selected = self.selected_key
        old_cells = self._cells
        keys = [k for k, _ in rows]
        cells = [tuple(values) for _, values in rows]
        lines = self._lines
        for i, new in enumerate(cells):
            if i >= len(old_cells) or old_cells[i] != new:
                lines.pop(i, None)
        for i in range(len(cells), len(old_cells)):
            lines.pop(i, None)
        self._keys, self._cells = keys, cells
        widths = self._measure()
        if widths != self._widths:
            self._relayout(widths)
        else:
            self.virtual_size = Size(sum(widths) + 2 * PAD * len(widths), len(keys) + 1)
            self.refresh()
        if selected is not None and selected in keys:
            self.cursor_row = keys.index(selected)
        elif self.cursor_row >= len(keys):
            self.cursor_row = max(0, len(keys) - 1)
        else:
            self.post_message(self.RowHighlighted(self, self.selected_key))

    def _measure(self) -> list[int]:
        widths = [cell_len(label) for _, label in self._columns]
        for row in self._cells:
            for i, value in enumerate(row[: len(widths)]):
                n = cell_len(value)
                if n > widths[i]:
                    widths[i] = n
        return widths

    def _relayout(self, widths: list[int] | None = None) -> None:
        self._widths = widths if widths is not None else self._measure()
        self._lines.clear()
        self._header = None
        self.virtual_size = Size(
            sum(self._widths) + 2 * PAD * len(self._widths), len(self._keys) + 1
        )
        self.refresh()

    # ---- rendering -----------------------------------------------------------------
    def _render_cells(self, values: Sequence[Cell], base: Style) -> Strip:
        segments: list[Segment] = []
        pad = " " * PAD
        for value, width in zip(values, self._widths, strict=False):
            if isinstance(value, Text):
                segments.append(Segment(pad, base))
                for span_text, span_style in _text_segments(value):
                    segments.append(Segment(span_text, base + span_style if span_style else base))
                segments.append(Segment(" " * (width - value.cell_len) + pad, base))
            else:
                segments.append(
                    Segment(pad + value + " " * (width - str_cell_len(value)) + pad, base)
                )
        return Strip(segments)

    def _styles(self) -> tuple[Style, Style, Style]:
        """Base, header and cursor styles, computed once per style change or focus."""
        if self._style_cache is None:
            base = self.rich_style
            self._style_cache = (
                base,
                base + self.get_component_rich_style("snapshot-table--header"),
                base
                + self.get_component_rich_style(
                    "snapshot-table--cursor" if self.has_focus else "snapshot-table--cursor-blurred"
                ),
            )
        return self._style_cache

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x, scroll_y = self.scroll_offset
        base, header_style, cursor_style = self._styles()
        if y == 0:
            if self._header is None:
                self._header = self._render_cells(
                    [label for _, label in self._columns], header_style
                )
            return self._header.crop_extend(scroll_x, scroll_x + width, header_style)
        row = scroll_y + y - 1
        if row >= len(self._cells):
            return Strip.blank(width, base)
        if row == self.cursor_row:  # drawn afresh: the cursor's background under the colours
            line = self._render_cells(self._cells[row], cursor_style)
            return line.crop_extend(scroll_x, scroll_x + width, cursor_style)
        line = self._lines.get(row)
        if line is None:
            line = self._lines[row] = self._render_cells(self._cells[row], base)
        return line.crop_extend(scroll_x, scroll_x + width, base)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._style_cache = None
        self._lines.clear()
        self._header = None

    def on_focus(self) -> None:
        self._style_cache = None
        self.refresh()

    def on_blur(self) -> None:
        self._style_cache = None
        self.refresh()

    # ---- cursor ------------------------------------------------------------------------
    def validate_cursor_row(self, row: int) -> int:
        return max(0, min(row, len(self._keys) - 1)) if self._keys else 0

    def watch_cursor_row(self, old: int, new: int) -> None:
        self._scroll_to_cursor()
        self.refresh()
        self.post_message(self.RowHighlighted(self, self.key_at(new)))

    def _scroll_to_cursor(self) -> None:
        visible = max(1, self.scrollable_content_region.height - 1)
        top = round(self.scroll_y)
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False, immediate=True)
        elif self.cursor_row >= top + visible:
            self.scroll_to(y=self.cursor_row - visible + 1, animate=False, immediate=True)

    def on_resize(self) -> None:
        self._scroll_to_cursor()

    def action_cursor(self, delta: int) -> None:
        self.cursor_row += delta

    def action_page(self, direction: int) -> None:
        self.cursor_row += direction * max(1, self.scrollable_content_region.height - 2)

    def action_edge(self, end: int) -> None:
        self.cursor_row = len(self._keys) - 1 if end else 0

    def action_select(self) -> None:
        if self._keys:
            self.post_message(self.RowSelected(self, self.selected_key))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        x, y = offset.x + round(self.scroll_x), offset.y
        if y == 0:
            edge = 0
            for (key, _), width in zip(self._columns, self._widths, strict=False):
                edge += width + 2 * PAD
                if x < edge:
                    self.post_message(self.HeaderSelected(self, key))
                    return
            return
        row = round(self.scroll_y) + y - 1
        if 0 <= row < len(self._keys):
            if row == self.cursor_row and event.chain >= 2:
                self.action_select()
            self.cursor_row = row


def _text_segments(text: Text) -> list[tuple[str, Style | None]]:
    """A one-line Text as (text, style) runs, without a Console."""
    plain_text = text.plain
    base = Style.parse(text.style) if isinstance(text.style, str) else text.style
    if not text.spans:
        return [(plain_text, base or None)]
    # the style of each character: the base, then each span on top
    styles: list[Style] = [base or Style()] * len(plain_text)
    for span in text.spans:
        span_style = Style.parse(span.style) if isinstance(span.style, str) else span.style
        for i in range(span.start, min(span.end, len(plain_text))):
            styles[i] = styles[i] + span_style
    runs: list[tuple[str, Style | None]] = []
    start = 0
    for i in range(1, len(plain_text) + 1):
        if i == len(plain_text) or styles[i] != styles[start]:
            runs.append((plain_text[start:i], styles[start]))
            start = i
    return runs
