"""The wheel's build hook: the package from the folder above, except in an editable
wheel (which puts that folder on sys.path instead: pyproject.toml's dev-mode-dirs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class CustomBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version != "editable":
            package = Path(self.root).resolve().parent / "disque"
            build_data["force_include"][str(package)] = "disque"
