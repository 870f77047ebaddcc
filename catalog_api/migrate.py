"""Alembic, driven from code so `cardcat db upgrade` needs no ini file or working directory."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def upgrade() -> None:
    command.upgrade(alembic_config(), "head")


def check() -> None:
    """Fails when the models and the migrations disagree (CI runs it)."""
    command.check(alembic_config())


def revision(message: str) -> None:
    command.revision(alembic_config(), message=message, autogenerate=True)
