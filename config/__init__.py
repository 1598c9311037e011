"""Typed stack-config model and its validation (no Pulumi resources here)."""

from config.errors import ConfigError, ConfigIssue
from config.load import STACK_CONFIG, load_platform
from config.secrets import SECRET_KEYS
from config.vocabulary import PROJECT
from config.model import Platform

__all__ = ["ConfigError", "ConfigIssue", "PROJECT", "SECRET_KEYS", "STACK_CONFIG", "Platform", "load_platform"]
