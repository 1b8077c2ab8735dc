"""The settings as people read them (``livingrag config show``, the settings table of
docs/configuration.md): plain JSON-able data with secrets masked, and the Markdown table of every
setting's variable, default and meaning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr

from livingrag.config import Settings, mask_url


def settings_as_dict(settings: Settings, *, mask_secrets: bool = True) -> dict[str, Any]:
    """The effective settings as plain JSON-able data, secrets masked."""

    def conv(v: Any) -> Any:
        if isinstance(v, SecretStr):
            return mask_url(v.get_secret_value()) if mask_secrets else v.get_secret_value()
        if isinstance(v, BaseModel):
            return {k: conv(getattr(v, k)) for k in type(v).model_fields}
        if isinstance(v, Path):
            return str(v)
        if isinstance(v, list | tuple):
            return [conv(x) for x in v]
        return v

    return conv(settings)


def settings_table() -> str:
    """The settings table of docs/configuration.md: every setting's variable, default and meaning."""
    from pydantic_core import PydanticUndefined

    def default_of(info: Any) -> str:
        if info.default is not PydanticUndefined:
            d = info.default
            return "unset" if d is None else f"`{d}`"
        if info.default_factory is list:
            return "unset"
        return "per user (see below)"

    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for group, field in Settings.model_fields.items():
        model = field.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            for key, info in model.model_fields.items():
                desc = (info.description or "").replace("|", "\\|")
                rows.append(f"| `LIVINGRAG_{group.upper()}__{key.upper()}` | {default_of(info)} | {desc} |")
        else:
            rows.append(f"| `LIVINGRAG_{group.upper()}` | {default_of(field)} | {field.description or ''} |")
    return "\n".join(rows)
