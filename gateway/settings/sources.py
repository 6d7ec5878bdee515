"""Where Settings' values come from beside init kwargs and the environment: the config file (TOML or
YAML), the short legacy environment names of two engine settings, and a .env file filtered to
Settings' own names."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

import yaml
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

ENV_PREFIX = "RADIXGATE_"
# short environment names -> the engine setting each stands for (RADIXGATE_ENGINE__<NAME> wins over them)
LEGACY_ENV = {f"{ENV_PREFIX}NATIVE_KERNELS": "native_kernels", f"{ENV_PREFIX}CACHE_DIR": "cache_dir"}


class ConfigFileSource(PydanticBaseSettingsSource):
    """Values from the TOML/YAML file named by `config_file=` or RADIXGATE_CONFIG_FILE (lowest priority but defaults)."""

    def __init__(self, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        self._init_settings = init_settings

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = self._init_settings().get("config_file") or os.environ.get(f"{ENV_PREFIX}CONFIG_FILE")
        return read_config_file(Path(path)) if path else {}


class KnownNamesSource(PydanticBaseSettingsSource):
    """Another source's values for Settings' own fields only: a .env file, like the environment, may hold
    variables for other programs (and RADIXGATE_* names this version does not know), which are ignored."""

    def __init__(self, settings_cls: type[BaseSettings], source: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        self._source = source

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return {k: v for k, v in self._source().items() if k in self.settings_cls.model_fields}


class LegacyEnvSource(PydanticBaseSettingsSource):
    """The engine settings that LEGACY_ENV's short environment names set, as {"engine": {...}}."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        engine = {name: os.environ[env] for env, name in LEGACY_ENV.items() if os.environ.get(env)}
        return {"engine": engine} if engine else {}


def read_config_file(path: Path) -> dict[str, Any]:
    """Parse a TOML (.toml) or YAML (.yaml/.yml) config file into a dict; raises ValueError on other suffixes."""
    if not path.is_file():
        raise FileNotFoundError(f"config file not found: {path}")
    suffix = path.suffix.lower()
    if suffix == ".toml":
        return tomllib.loads(path.read_text())
    if suffix in (".yaml", ".yml"):
        return yaml.safe_load(path.read_text()) or {}
    raise ValueError(f"config file must be .toml, .yaml or .yml: {path}")
