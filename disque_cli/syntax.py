"""Command syntax as a grammar: what to hint and what to complete as you type.

A syntax string from the command table (`queue job ms-timeout [REPLICATE
count] [ASYNC]`) is parsed into elements: required positions (a placeholder,
a TOKEN or a choice `A|B`) and optional groups `[...]`, possibly repeatable
`[x ...]`. Consecutive optional groups may come in any order, like the
options of ADDJOB; a required element closes the options before it (nothing
of GETJOB's options comes after FROM).

`hint(words)` is what is left to type after the words already typed (the
grey text of the REPL); `candidates(words)` are the words that may come next
(tab completion). Both return nothing when the typed words do not fit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache

from disque_cli import commands
from disque_cli.commands import Command


@dataclass(frozen=True)
class Word:
    text: str
    is_token: bool  # a literal keyword (UPPERCASE) rather than a placeholder

    def matches(self, typed: str) -> bool:
        return not self.is_token or typed.upper() == self.text


@dataclass(frozen=True)
class Item:
    """One argument position: a single word or a choice of words."""

    words: tuple[Word, ...]

    def matches(self, typed: str) -> bool:
        return any(word.matches(typed) for word in self.words)

    def matches_token(self, typed: str) -> bool:
        return any(word.is_token and word.matches(typed) for word in self.words)

    @property
    def starts_with_placeholder(self) -> bool:
        return any(not word.is_token for word in self.words)

    def render(self) -> str:
        return "|".join(word.text for word in self.words)


@dataclass(frozen=True)
class Element:
    items: tuple[Item, ...]
    optional: bool = False
    repeat: bool = False

    def render(self) -> str:
        inner = " ".join(item.render() for item in self.items)
        if self.repeat:
            inner += " ..."
        return f"[{inner}]" if self.optional else inner


def _item(text: str) -> Item:
    return Item(tuple(Word(choice, choice.isupper()) for choice in text.split("|")))


@cache
def parse(syntax: str) -> tuple[Element, ...]:
    """Parse redis-cli syntax notation into elements (nested groups are flattened)."""
    tokens = syntax.replace("[", " [ ").replace("]", " ] ").split()
    elements: list[Element] = []
    depth = 0
    group: list[Item] = []
    repeat = False
    for token in tokens:
        if token == "[":
            depth += 1
        elif token == "]":
            depth -= 1
            if depth == 0 and group:
                elements.append(Element(tuple(group), optional=True, repeat=repeat))
                group, repeat = [], False
        elif token == "...":
            if depth:
                repeat = True
            elif elements:
                last = elements[-1]
                elements.append(Element(last.items, optional=True, repeat=True))
        elif depth:
            group.append(_item(token))
        else:
            elements.append(Element((_item(token),)))
    return tuple(elements)


@dataclass
class _State:
    index: int = 0  # next element to match
    used: set[int] = field(default_factory=set)  # optional groups already given
    pending: list[Item] = field(default_factory=list)  # rest of the group being typed


def _advance(elements: tuple[Element, ...], words: list[str]) -> _State | None:
    """Match typed words against the grammar; None when they do not fit."""
    state = _State()
    for typed in words:
        if state.pending:
            item = state.pending.pop(0)
            if not item.matches(typed):
                return None
            continue
        run_end = state.index
        while run_end < len(elements) and elements[run_end].optional:
            run_end += 1
        run = [k for k in range(state.index, run_end) if k not in state.used or elements[k].repeat]
        required = elements[run_end] if run_end < len(elements) else None

        def take_group(k: int) -> None:
            state.used.add(k)
            state.pending = list(elements[k].items[1:])

        token_group = next((k for k in run if elements[k].items[0].matches_token(typed)), None)
        placeholder_group = next(
            (k for k in run if elements[k].items[0].starts_with_placeholder), None
        )
        if token_group is not None:
            take_group(token_group)
        elif required is not None and required.items[0].matches_token(typed):
            state.index = run_end + 1
        elif placeholder_group is not None:
            take_group(placeholder_group)
        elif required is not None and required.items[0].matches(typed):
            state.index = run_end + 1
        else:
            return None
    return state


def hint_for(elements: tuple[Element, ...], words: list[str]) -> str | None:
    state = _advance(elements, words)
    if state is None:
        return None
    parts = [item.render() for item in state.pending]
    for k in range(state.index, len(elements)):
        element = elements[k]
        if element.optional and k in state.used and not element.repeat:
            continue
        parts.append(element.render())
    return " ".join(parts)


def candidates_for(
    elements: tuple[Element, ...], words: list[str], values: Mapping[str, tuple[str, ...]]
) -> list[str]:
    state = _advance(elements, words)
    if state is None:
        return []
    if state.pending:
        items = [state.pending[0]]
    else:
        items = []
        k = state.index
        while k < len(elements):
            element = elements[k]
            if not element.optional:
                items.append(element.items[0])
                break
            if k not in state.used or element.repeat:
                items.append(element.items[0])
            k += 1
    out: list[str] = []
    for item in items:
        for word in item.words:
            choices = (word.text,) if word.is_token else values.get(word.text, ())
            out.extend(choice for choice in choices if choice not in out)
    return out


# ---- command level ---------------------------------------------------------------


def _container_hint(command: Command) -> str:
    names = "|".join(sub.words[1] for sub in command.subcommands)
    return f"[{names}]" if command.syntax.startswith("[") else names


def _entry_and_args(words: list[str]) -> tuple[Command, list[str]] | None:
    command = commands.lookup(words[0]) if words else None
    if command is None:
        return None
    if command.subcommands and len(words) > 1:
        sub = commands.resolve(words[:2])
        if sub is None or sub is command:
            return None
        return sub, words[2:]
    return command, words[1:]


def hint(words: list[str]) -> str | None:
    """The syntax left to type after `words` (the command name included)."""
    if not words:
        return None
    command = commands.lookup(words[0])
    if command is None:
        return None
    if command.subcommands and len(words) == 1:
        return _container_hint(command)
    found = _entry_and_args(words)
    if found is None:
        return None
    entry, args = found
    return hint_for(parse(entry.syntax), args)


def candidates(words: list[str]) -> list[str]:
    """Words that may follow `words` (complete words only, the command name included)."""
    if not words:
        return commands.command_names()
    command = commands.lookup(words[0])
    if command is None:
        return []
    if command.subcommands and len(words) == 1:
        return [sub.words[1] for sub in command.subcommands]
    found = _entry_and_args(words)
    if found is None:
        return []
    entry, args = found
    return candidates_for(parse(entry.syntax), args, entry.values)
