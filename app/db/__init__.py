"""Persistence: SQLAlchemy models, the engine/session factory and migrations."""
