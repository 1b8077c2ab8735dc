"""The SQL a 5-passage add runs on 2Wiki's corpus, statement by statement (idle machine, real models,
a copy of the data: it writes). Prints each run's phases and the sum of its statements' times, then
the statements of the last run over 1 ms.

usage: cp -a /work/lrg-2wiki /tmp/w2-phase && LIVINGRAG_DB__DATA_DIR=/tmp/w2-phase python write_sql_timing.py
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from sqlalchemy import event  # noqa: E402

from livingrag.config import get_settings  # noqa: E402
from livingrag.corpus import service  # noqa: E402
from livingrag.corpus.ingest import Document  # noqa: E402
from livingrag.db.setup import open_database  # noqa: E402

settings = get_settings()
db = open_database(settings.db)
info = service.get_corpus(db, 1, 1)
idx = service.indexer(db, 1, info, settings)
idx.index_documents([Document("warm", "Warm Up Person was born in Warmville.")])
times: list[tuple[float, str]] = []


@event.listens_for(db.app_engine, "before_cursor_execute")
def _before(conn, cur, stmt, params, ctx, many):  # type: ignore[no-untyped-def]
    conn.info["t0"] = time.perf_counter()


@event.listens_for(db.app_engine, "after_cursor_execute")
def _after(conn, cur, stmt, params, ctx, many):  # type: ignore[no-untyped-def]
    times.append(((time.perf_counter() - conn.info["t0"]) * 1000, " ".join(stmt.split())[:110]))


for r in range(4):
    times.clear()
    docs = [
        Document(f"Phase test Y{r}-{i}", f"Quorvath Linden Y{r}{i} was born in Emberfall Y{r}{i} and studied music "
                 f"at the Varnholt Conservatory in {1950 + i}.")
        for i in range(5)
    ]  # fmt: skip
    t = time.perf_counter()
    rep = idx.index_documents(docs)
    total = (time.perf_counter() - t) * 1000
    phases = {k: round(v * 1000, 1) for k, v in rep.phases.items()}
    print("total", round(total, 1), phases, "sql sum", round(sum(ms for ms, _ in times), 1), "statements", len(times))
for ms, s in times:
    if ms > 1:
        print(f"{ms:7.2f} {s}")
db.close()
