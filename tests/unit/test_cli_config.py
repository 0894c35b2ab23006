"""The CLI's parsed command line (`disque_cli.options.Config`): one typed field per
option of the option table, so a type checker sees every option."""

from __future__ import annotations

import dataclasses
import typing

from disque_cli.main import parse
from disque_cli.options import OPTIONS, Config
from disque_cli.render import Mode

BASE = {"endpoint", "mode", "render", "args"}  # not options: built from them


def expected_type(dest: str) -> object:
    """The type an option's value has once click parsed it."""
    option = next(opt for opt in OPTIONS if opt.dest == dest)
    if option.flag_value is not None:
        return str | None
    if not option.takes_value:
        return bool
    return option.kind if option.default is not None else option.kind | None


def test_every_option_is_a_typed_field() -> None:
    hints = typing.get_type_hints(Config)
    fields = {field.name for field in dataclasses.fields(Config)} - BASE
    assert fields == {opt.dest for opt in OPTIONS}
    assert {name: hints[name] for name in fields} == {name: expected_type(name) for name in fields}


def test_defaults_are_the_parser_defaults() -> None:
    config = parse([], stdout_is_tty=True)
    for field in dataclasses.fields(Config):
        if field.name not in BASE:
            assert getattr(config, field.name) == field.default, field.name


def test_parsed_values_have_their_types() -> None:
    config = parse(
        ["-p", "7712", "-r", "3", "-i", "0.5", "--json", "-e", "qlen", "q"], stdout_is_tty=False
    )
    assert (config.port, config.repeat, config.interval) == (7712, 3, 0.5)
    assert config.exit_on_error is True and config.output == "json"
    assert config.mode is Mode.JSON and config.endpoint.port == 7712
    assert config.args == [b"qlen", b"q"]
