"""Statements per ask and per add: one `serve` worker, log_statement=all for N serial asks and M
serial adds (after a warm-up), the server log counted between markers.

usage: python statements.py DATADIR [N_ASKS] [N_ADDS]"""
import collections, json, re, sys, time
from pathlib import Path

ROOT = Path("/work/main"); sys.path.insert(0, str(ROOT))
import httpx
from sqlalchemy import text
import tests.test_api_load as tl
from livingrag.api.load import DEFAULT_QUESTIONS
from livingrag.config import get_settings
from livingrag.db.setup import open_database
from livingrag.testing.openai_server import OpenAICompatServer
from tests.api_support import Server, server_env

data_dir, n_asks, n_adds = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20, int(sys.argv[3]) if len(sys.argv) > 3 else 5
with OpenAICompatServer() as llm:
    env = server_env("", llm.base_url, LIVINGRAG_DB__DATA_DIR=data_dir); env.pop("LIVINGRAG_DB__URL")
    srv = Server(env, log_path=Path("/tmp/lrg-stmts.log")).start(timeout=300)
    try:
        _, key, cid = tl._setup(srv.url)
        h = {"Authorization": f"Bearer {key}"}
        http = httpx.Client(base_url=srv.url, headers=h, timeout=60)
        ask = lambda i: http.post("/v1/ask", json={"question": DEFAULT_QUESTIONS[i % len(DEFAULT_QUESTIONS)], "corpus": cid, "ablations": ["gate"]})
        add = lambda i: http.post(f"/v1/corpora/{cid}/passages", json={"passages": [{"text": f"stmt passage {i}: Village {i} lies on the river Ostra in the county of Vell.", "title": f"Village {i}"}]})
        for i in range(12): ask(i); add(100 + i)
        time.sleep(2)
        db = open_database(get_settings(db={"data_dir": data_dir}).db)
        with db.owner_session() as s:
            print("logfile", s.execute(text("SELECT pg_current_logfile(), current_setting('logging_collector'), current_setting('data_directory')")).one(), file=sys.stderr)
        def setlog(v):
            with db.owner_engine.connect() as c:
                c = c.execution_options(isolation_level="AUTOCOMMIT")
                c.execute(text(f"ALTER SYSTEM SET log_statement = '{v}'")); c.execute(text("SELECT pg_reload_conf()"))
        def mark(m):
            with db.owner_engine.connect() as c: c.execute(text(f"SELECT 'MARK-{m}'"))
        setlog("all"); time.sleep(1); mark("asks")
        for i in range(n_asks): assert ask(i).status_code == 200
        time.sleep(3); mark("adds")
        for i in range(n_adds): assert add(1000 + i).status_code == 201
        time.sleep(3); mark("end"); setlog("none")
        print(json.dumps({"asks": n_asks, "adds": n_adds}))
    finally:
        srv.stop()
