"""Named, versioned prompt templates. None is inlined in logic.

Each template is a file ``<name>.v<version>.txt`` in this folder. A file may hold a system part
and a user part separated by a line ``---user---``; placeholders are ``{name}`` (Python
``str.format``; literal braces are doubled). ``get_prompt(name)`` returns the newest version.
A template may ship an output grammar ``<name>.v<version>.gbnf`` (llama.cpp GBNF) that in-process
models use to keep the reply in the template's format.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from string import Formatter

from livingrag.errors import InvalidInput

_DIR = Path(__file__).parent
_FILE = re.compile(r"^(?P<name>[a-z0-9_]+)\.v(?P<version>\d+)\.txt$")
_SPLIT = "---user---"


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    version: int
    system: str | None
    user: str

    @property
    def id(self) -> str:
        return f"{self.name}.v{self.version}"

    @property
    def fields(self) -> frozenset[str]:
        parts = [self.user] + ([self.system] if self.system else [])
        return frozenset(f for p in parts for _, f, _, _ in Formatter().parse(p) if f)

    def _check(self, values: dict[str, object]) -> None:
        missing = self.fields - values.keys()
        extra = values.keys() - self.fields
        if missing or extra:
            raise InvalidInput(f"prompt {self.id}: missing values {sorted(missing)}, unexpected values {sorted(extra)}")

    def render(self, **values: object) -> list[dict[str, str]]:
        """Fill the placeholders and return chat messages; a missing or unknown value is an error."""
        self._check(values)
        msgs = []
        if self.system:
            msgs.append({"role": "system", "content": self.system.format(**values)})
        msgs.append({"role": "user", "content": self.user.format(**values)})
        return msgs

    @property
    def grammar(self) -> str | None:
        """The output grammar ``<name>.v<version>.gbnf`` (llama.cpp GBNF) that ships with this template, if any."""
        path = _DIR / f"{self.id}.gbnf"
        return path.read_text(encoding="utf-8") if path.is_file() else None

    def render_text(self, **values: object) -> str:
        """Fill a fragment template (one without a system part, e.g. a passage or scaffold block)."""
        if self.system:
            raise InvalidInput(f"prompt {self.id} has a system part: render it as messages with render()")
        self._check(values)
        return self.user.format(**values)


def load_templates(directory: Path) -> dict[str, dict[int, PromptTemplate]]:
    """Every ``<name>.v<N>.txt`` template in ``directory``, by name and version."""
    out: dict[str, dict[int, PromptTemplate]] = {}
    for f in sorted(Path(directory).glob("*.txt")):
        m = _FILE.match(f.name)
        if not m:
            continue
        raw = f.read_text(encoding="utf-8")
        if _SPLIT in raw:
            system, user = raw.split(_SPLIT, 1)
            system_text: str | None = system.strip("\n")
        else:
            system_text, user = None, raw
        t = PromptTemplate(m["name"], int(m["version"]), system_text, user.strip("\n"))
        out.setdefault(t.name, {})[t.version] = t
    return out


@cache
def _catalogue() -> dict[str, dict[int, PromptTemplate]]:
    return load_templates(_DIR)


def select(catalogue: dict[str, dict[int, PromptTemplate]], name: str, version: int | None = None) -> PromptTemplate:
    """The template ``name`` at ``version`` (default: the newest) from ``catalogue``."""
    versions = catalogue.get(name)
    if not versions:
        raise InvalidInput(f"no prompt named {name!r}; known: {', '.join(sorted(catalogue))}")
    if version is None:
        return versions[max(versions)]
    if version not in versions:
        raise InvalidInput(f"prompt {name!r} has no version {version}; known: {sorted(versions)}")
    return versions[version]


def get_prompt(name: str, version: int | None = None) -> PromptTemplate:
    """The packaged template ``name`` at ``version`` (default: newest)."""
    return select(_catalogue(), name, version)


def list_prompts() -> list[PromptTemplate]:
    """Every packaged template, every version."""
    return [t for versions in _catalogue().values() for t in versions.values()]
