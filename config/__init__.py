"""Typed stack-config model and its validation (no Pulumi resources here)."""

from config.errors import ConfigError, ConfigIssue
from config.load import TOP_LEVEL_KEYS, load_platform
from config.vocabulary import PROJECT, SECRET_KEYS
from config.model import Platform

__all__ = ["ConfigError", "ConfigIssue", "PROJECT", "SECRET_KEYS", "TOP_LEVEL_KEYS", "Platform", "load_platform"]
